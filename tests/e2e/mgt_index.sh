#!/usr/bin/env bash
# End-to-end checks of mgt-index on a corpus tokenized by mgt-tokenize: the summary, Megatron's
# cache files, a second run finding the cache, a blend, and clear failures on bad input.
# Usage: bash tests/e2e/mgt_index.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

gpt2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$src/datasets/gpt2-vocab.json"
      --merge-file "$src/datasets/gpt2-merges.txt")
"$bin/mgt-tokenize" --input "$src/datasets/corpus-tinyshakespeare.jsonl" --output-prefix "$work/shak" \
  "${gpt2[@]}" --append-eod --quiet >/dev/null
sizes=(--seq-length 128 --train-iters 100 --global-batch-size 8 --eval-interval 50 --eval-iters 2)
prefix=$work/shak_text_document

expect_status 0 "$bin/mgt-index" --help
grep -q -- "--data-path" "$work/out.txt" || fail "--help does not list --data-path"

# First run builds; the summary is JSON on stdout and counts Megatron's sample numbers:
# train asks for 100 x 8 samples, valid for (100 // 50 + 1) x 2 x 8, test for 2 x 8.
expect_status 0 "$bin/mgt-index" --data-path "$prefix" "${sizes[@]}" "${gpt2[@]}" --data-cache-path "$work/cache"
python3 - "$work/out.txt" <<'PY' || fail "summary JSON"
import json, sys
s = json.load(open(sys.argv[1]))["splits"]
assert [s[k]["requested"] for k in ("train", "valid", "test")] == [800, 48, 16], s
for k in ("train", "valid", "test"):
    assert s[k]["samples"] >= s[k]["requested"], k
    assert all(not d["cache_hit"] for d in s[k]["datasets"]), k
PY
for split in train valid test; do
  for kind in description.txt document_index.npy sample_index.npy shuffle_index.npy; do
    ls "$work/cache/"*-GPTDataset-$split-$kind >/dev/null || fail "no $split $kind"
  done
done
grep -q '"class": "_GPT2BPETokenizer"' "$work/cache/"*-GPTDataset-train-description.txt ||
  fail "description lacks the tokenizer"
cp -r "$work/cache" "$work/cache.first"

# Second run: every split found in the cache, files untouched.
expect_status 0 "$bin/mgt-index" --data-path "$prefix" "${sizes[@]}" "${gpt2[@]}" --data-cache-path "$work/cache"
grep -q '"cache_hit": false' "$work/out.txt" && fail "second run rebuilt indices"
diff -r "$work/cache" "$work/cache.first" >/dev/null || fail "second run changed the cache"

# A weighted blend of two datasets, cached with its blending indices.
cp "$prefix.bin" "$work/copy.bin"; cp "$prefix.idx" "$work/copy.idx"
expect_status 0 "$bin/mgt-index" --data-path 0.3 "$prefix" 0.7 "$work/copy" "${sizes[@]}" "${gpt2[@]}" \
  --data-cache-path "$work/cache"
ls "$work/cache/"*-BlendedDataset-train-dataset_index.npy >/dev/null || fail "no blend index"

# Bad input: clear one-line errors, right exit codes.
expect_status 1 "$bin/mgt-index" --data-path "$work/missing" "${sizes[@]}" "${gpt2[@]}"
grep -q "missing.idx" "$work/err.txt" || fail "missing dataset not named"
head -c 1000 "$prefix.bin" > "$work/trunc.bin"; cp "$prefix.idx" "$work/trunc.idx"
expect_status 1 "$bin/mgt-index" --data-path "$work/trunc" "${sizes[@]}" "${gpt2[@]}"
grep -q "truncated" "$work/err.txt" || fail "truncated .bin not reported"
# A FIFO where a dataset file is expected is refused at once, naming it (it used to hang the open);
# so is a FIFO as the vocabulary file.
mkfifo "$work/fifo.idx"
cp "$prefix.bin" "$work/fifo.bin"
expect_status 1 timeout 60 "$bin/mgt-index" --data-path "$work/fifo" "${sizes[@]}" "${gpt2[@]}"
grep -q "^mgt-index: '$work/fifo.idx' is a FIFO, not a regular file$" "$work/err.txt" || fail "FIFO .idx not refused"
mkfifo "$work/vocab.fifo"
expect_status 1 timeout 60 "$bin/mgt-index" --data-path "$prefix" "${sizes[@]}" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$work/vocab.fifo" --merge-file "$src/datasets/gpt2-merges.txt"
grep -q "'$work/vocab.fifo' is a FIFO, not a regular file" "$work/err.txt" || fail "FIFO vocab file not refused"
expect_status 2 "$bin/mgt-index" --data-path "$prefix" "${sizes[@]}" "${gpt2[@]}" --split 1,x,1
expect_status 2 "$bin/mgt-index" --data-path "$prefix" "${sizes[@]}" "${gpt2[@]}" --bogus-flag
grep -q -- "--bogus-flag" "$work/err.txt" || fail "unknown flag not named"
[[ $(wc -l < "$work/err.txt") -le 2 ]] || fail "error is not short: $(cat "$work/err.txt")"
# The tokenizer's own checks hold here too: a TikTokenizer special-token table larger than the
# memory left (1 GiB of data, ulimit -d) is refused at once, naming the flag.
(ulimit -d 1048576
 expect_status 2 timeout 60 "$bin/mgt-index" --data-path "$prefix" "${sizes[@]}" --tokenizer-type TikTokenizer \
   --tokenizer-model "$src/datasets/tokenizer-tests/tiktoken-bpe.json" --tiktoken-pattern v2 --vocab-size 67109000 \
   --tiktoken-num-special-tokens 67108864)
grep -q -- "--tiktoken-num-special-tokens 67108864 needs about" "$work/err.txt" ||
  { cat "$work/err.txt" >&2; fail "mgt-index: a special-token table larger than memory not refused"; }
echo "mgt-index e2e: all checks passed"
