#!/usr/bin/env bash
# End-to-end checks of mgt-tokenize: usage, a real corpus, stdin and gzip input giving the same
# bytes, bad input failing with FILE:LINE and leaving nothing, --skip-bad-lines, --merge.
# Usage: bash tests/e2e/mgt_tokenize.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1/mgt-tokenize"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

CORPUS="$SRC/datasets/corpus-tinyshakespeare.jsonl"
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")

# Usage.
expect_status 0 "$BIN" --help
grep -q -- "--json-keys" "$WORK/out.txt" || fail "--help does not list --json-keys"
grep -q -- "--append-eod" "$WORK/out.txt" || fail "--help does not list --append-eod"
expect_status 2 "$BIN"
grep -q "mgt-tokenize: --input is required" "$WORK/err.txt" || fail "no message for missing --input"
expect_status 2 "$BIN" --input "$CORPUS" --output-prefix "$WORK/x" "${GPT2[@]}" --no-such-flag
grep -q -- "--no-such-flag" "$WORK/err.txt" || fail "unknown flag not named"
expect_status 2 "$BIN" --input "$CORPUS" --output-prefix "$WORK/x" --trust-remote-code
grep -q "not supported" "$WORK/err.txt" || fail "refused Megatron flag without reason"
expect_status 2 "$BIN" --input "$CORPUS" --output-prefix "$WORK/x" "${GPT2[@]}" --workers zero
# A mistyped worker count is refused before it takes all memory.
expect_status 2 "$BIN" --input "$CORPUS" --output-prefix "$WORK/x" "${GPT2[@]}" --workers 99999999999
grep -q "^mgt-tokenize: --workers 99999999999: give 1 to 4096$" "$WORK/err.txt" || fail "a huge --workers not refused"

# A real corpus.
expect_status 0 "$BIN" --input "$CORPUS" --output-prefix "$WORK/file" "${GPT2[@]}" --append-eod --workers 2
grep -q '"documents": 7222' "$WORK/out.txt" || fail "summary does not count 7222 documents"
[[ -s "$WORK/file_text_document.bin" && -s "$WORK/file_text_document.idx" ]] || fail "no outputs"
[[ "$(head -c 9 "$WORK/file_text_document.idx" | od -An -c | tr -d ' ')" == 'MMIDIDX\0\0' ]] ||
  fail "bad .idx magic"

# A merges file of another tokenizer: the pieces the vocabulary lacks encode as id 0, as
# Megatron encodes them, with a warning that names both files.
printf '#version: 0.2\nz q\nzq zq\n' >"$WORK/other-merges.txt"
printf '{"text": "zqzqzqzq zq"}\n' >"$WORK/zq.jsonl"
expect_status 0 "$BIN" --input "$WORK/zq.jsonl" --output-prefix "$WORK/zq" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$SRC/datasets/gpt2-vocab.json" --merge-file "$WORK/other-merges.txt"
grep -q "^warning: GPT-2 vocab file .*gpt2-vocab.json lacks 2 of the pieces merge file $WORK/other-merges.txt builds (the first: \"zq\")" \
  "$WORK/err.txt" || fail "a vocabulary lacking merged pieces passes without a warning"
! grep -q "lacks" <("$BIN" --input "$WORK/zq.jsonl" --output-prefix "$WORK/zq2" "${GPT2[@]}" 2>&1) ||
  fail "the GPT-2 files warn of each other"

# Standard input through a pipe, and gzip input: the same bytes.
cat "$CORPUS" | "$BIN" --input - --output-prefix "$WORK/stdin" "${GPT2[@]}" --append-eod --quiet >/dev/null
gzip -c "$CORPUS" >"$WORK/corpus.jsonl.gz"
"$BIN" --input "$WORK/corpus.jsonl.gz" --output-prefix "$WORK/gz" "${GPT2[@]}" --append-eod --quiet >/dev/null
gzip -c "$CORPUS" | "$BIN" --input - --output-prefix "$WORK/gzpipe" "${GPT2[@]}" --append-eod --quiet >/dev/null
# preprocess_data.py's flags until 2023 are named on the start-up line.
"$BIN" --input "$CORPUS" --output-prefix "$WORK/old_flags" "${GPT2[@]}" --dataset-impl mmap --chunk-size 25 \
  >/dev/null 2>"$WORK/old_flags.err"
grep -q -- "ignored flags (they change nothing here): --dataset-impl mmap" "$WORK/old_flags.err" ||
  fail "--dataset-impl mmap not named as ignored: $(cat "$WORK/old_flags.err")"
for name in stdin gz gzpipe; do
  for ext in bin idx; do
    cmp -s "$WORK/file_text_document.$ext" "$WORK/${name}_text_document.$ext" ||
      fail "$name input gives a different .$ext"
  done
done

# Bad input: exit 1, FILE:LINE in the message, no output left behind.
mkdir "$WORK/bad"
printf '{"text": "good"}\n{"text": "broken\n{"text": "also good"}\n' >"$WORK/bad/in.jsonl"
expect_status 1 "$BIN" --input "$WORK/bad/in.jsonl" --output-prefix "$WORK/bad/out" "${GPT2[@]}"
grep -q "^mgt-tokenize: $WORK/bad/in.jsonl:2: malformed JSON" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "bad line not reported as FILE:LINE"; }
[[ "$(ls "$WORK/bad")" == "in.jsonl" ]] || fail "a failed run left files: $(ls "$WORK/bad")"
expect_status 1 "$BIN" --input "$WORK/bad/missing.jsonl" --output-prefix "$WORK/bad/out" "${GPT2[@]}"
grep -q "missing.jsonl" "$WORK/err.txt" || fail "missing input not named"

# --skip-bad-lines: exit 0, the bad line counted.
expect_status 0 "$BIN" --input "$WORK/bad/in.jsonl" --output-prefix "$WORK/bad/out" "${GPT2[@]}" --skip-bad-lines
grep -q '"bad_lines": 1' "$WORK/out.txt" || fail "bad line not counted"
grep -q '"documents": 2' "$WORK/out.txt" || fail "good lines not kept"

# Symlinks planted at the output names, and at every temporary name a process id would give, are
# replaced or left alone, never written through: temporaries get unpredictable names and are
# created exclusively.
mkdir "$WORK/links"
echo precious >"$WORK/links/victim"
for ext in bin idx; do
  ln -s "$WORK/links/victim" "$WORK/links/out_text_document.$ext"
  for pid in $(seq $$ $(( $$ + 200 ))); do ln -s "$WORK/links/victim" "$WORK/links/out_text_document.$ext.tmp.$pid"; done
done
expect_status 0 "$BIN" --input "$WORK/bad/in.jsonl" --output-prefix "$WORK/links/out" "${GPT2[@]}" --skip-bad-lines
[[ $(cat "$WORK/links/victim") == precious ]] || fail "an output was written through a symlink"
for ext in bin idx; do
  [[ -f "$WORK/links/out_text_document.$ext" && ! -L "$WORK/links/out_text_document.$ext" ]] ||
    fail "out_text_document.$ext is not a regular file"
  cmp -s "$WORK/links/out_text_document.$ext" "$WORK/bad/out_text_document.$ext" || fail "wrong .$ext"
done
[[ $(find "$WORK/links" -name '*.tmp.*' -type f | wc -l) == 0 ]] || fail "a temporary was left behind"

# A directory as input is refused by name; a FIFO is a stream, read once its writer comes.
expect_status 1 "$BIN" --input "$WORK/links" --output-prefix "$WORK/links/dir" "${GPT2[@]}"
grep -q "input '$WORK/links' is a directory" "$WORK/err.txt" || fail "directory input not refused by name"
# A directory at an output's name is refused before the input is read, so that no other output
# has replaced its old dataset by then; a directory as a SentencePiece model, by name.
cp "$WORK/bad/out_text_document.bin" "$WORK/links/two_title_document.bin"
mkdir "$WORK/links/two_text_document.idx"
expect_status 1 "$BIN" --input "$WORK/bad/in.jsonl" --output-prefix "$WORK/links/two" "${GPT2[@]}" --skip-bad-lines \
  --json-keys title text
grep -q -- "--output-prefix $WORK/links/two_text_document.idx is a directory" "$WORK/err.txt" ||
  fail "a directory at an output name not refused by name: $(cat "$WORK/err.txt")"
cmp -s "$WORK/links/two_title_document.bin" "$WORK/bad/out_text_document.bin" || fail "an old dataset was replaced"
expect_status 1 "$BIN" --input "$WORK/bad/in.jsonl" --output-prefix "$WORK/links/sp" --tokenizer-type Llama2Tokenizer \
  --tokenizer-model "$WORK/links"
grep -qF "SentencePiece model '$WORK/links': is a directory" "$WORK/err.txt" ||
  fail "a directory as SentencePiece model not refused by name: $(cat "$WORK/err.txt")"
mkfifo "$WORK/in.fifo"
(sleep 1; cat "$WORK/bad/in.jsonl" >"$WORK/in.fifo") &
expect_status 0 timeout 60 "$BIN" --input "$WORK/in.fifo" --output-prefix "$WORK/fifo" "${GPT2[@]}" --skip-bad-lines
wait
cmp -s "$WORK/fifo_text_document.bin" "$WORK/bad/out_text_document.bin" || fail "FIFO input gives other tokens"

# A Hugging Face tokenizer directory whose tokenizer_config.json says "no maximum" as transformers
# writes it, int(1e30), wider than 64 bits: read (it used to be "not valid JSON").
mkdir "$WORK/hf-unbounded"
cp "$SRC/datasets/tokenizer-tests/hf-llama3-bpe/tokenizer.json" "$WORK/hf-unbounded/"
sed 's/"model_max_length": 131072/"model_max_length": 1000000000000000019884624838656/' \
  "$SRC/datasets/tokenizer-tests/hf-llama3-bpe/tokenizer_config.json" >"$WORK/hf-unbounded/tokenizer_config.json"
grep -q 1000000000000000019884624838656 "$WORK/hf-unbounded/tokenizer_config.json" || fail "test config not written"
head -50 "$CORPUS" >"$WORK/head.jsonl"
expect_status 0 "$BIN" --input "$WORK/head.jsonl" --output-prefix "$WORK/unbounded" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$WORK/hf-unbounded"
expect_status 0 "$BIN" --input "$WORK/head.jsonl" --output-prefix "$WORK/bounded" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$SRC/datasets/tokenizer-tests/hf-llama3-bpe"
cmp -s "$WORK/unbounded_text_document.bin" "$WORK/bounded_text_document.bin" || fail "model_max_length changed the ids"

# A TikTokenizer special-token table larger than the memory left is refused at once, naming the
# flag and the size (it used to end in std::bad_alloc after minutes). The memory is 1 GiB of data
# (ulimit -d), which the largest table (2^26 tokens) exceeds whatever the machine.
(ulimit -d 1048576
 expect_status 2 timeout 60 "$BIN" --input "$WORK/head.jsonl" --output-prefix "$WORK/tik" --tokenizer-type TikTokenizer \
   --tokenizer-model "$SRC/datasets/tokenizer-tests/tiktoken-bpe.json" --tiktoken-pattern v2 \
   --vocab-size 67109000 --tiktoken-num-special-tokens 67108864)
[[ $(wc -l <"$WORK/err.txt") == 1 ]] &&
  grep -q "^mgt-tokenize: --tiktoken-num-special-tokens 67108864 needs about .* GiB of memory for its table of special tokens, but only .* is available (RLIMIT_DATA (ulimit -d))$" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "a special-token table larger than memory not refused on one line"; }

# --merge: two datasets end to end.
expect_status 0 "$BIN" --merge --input "$WORK/file_text_document" "$WORK/bad/out_text_document" \
  --output-prefix "$WORK/merged"
grep -q '"documents": 7224' "$WORK/out.txt" || fail "merge does not hold 7224 documents"
expect_status 2 "$BIN" --merge --input "$WORK/file_text_document" --output-prefix "$WORK/merged2" --append-eod
grep -q -- "--append-eod: tokenizing flags mean nothing with --merge" "$WORK/err.txt" || fail "--append-eod beside --merge"

echo "mgt-tokenize e2e: all checks passed"
