#!/usr/bin/env bash
# End-to-end checks of mgt-eval: train a tiny checkpoint on mock data, evaluate it on a few
# LAMBADA lines and a WikiText-103 slice, read the JSON result and Megatron's result line, and
# fail cleanly on bad data, a missing checkpoint and bad flags.
# Usage: bash tests/e2e/mgt_eval.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

gpt2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$src/datasets/gpt2-vocab.json"
      --merge-file "$src/datasets/gpt2-merges.txt")
"$bin/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --micro-batch-size 2 --lr 1e-3 --train-iters 2 --log-interval 1 \
  --eval-iters 0 --mock-data "${gpt2[@]}" --save "$work/ckpt" --save-interval 2 >/dev/null 2>&1 ||
  fail "could not train the checkpoint"

head -n 6 "$src/datasets/lambada_test.jsonl" >"$work/lambada_test.jsonl"
head -n 30 "$src/datasets/wikitext-103.wiki.test.tokens" >"$work/wiki.test.tokens"
lambada=(--task LAMBADA --valid-data "$work/lambada_test.jsonl" --load "$work/ckpt")
wiki=(--task WIKITEXT103 --valid-data "$work/wiki.test.tokens" --load "$work/ckpt")

expect_status 0 "$bin/mgt-eval" --help
grep -q -- "--overlapping-eval" "$work/out.txt" || fail "--help does not list --overlapping-eval"

# LAMBADA, strict and not, the tokenizer taken from the checkpoint; seq 16 truncates examples.
expect_status 0 "$bin/mgt-eval" "${lambada[@]}" --micro-batch-size 4
grep -Eq '^ validation results on LAMBADA \| number correct: [0-9]\.[0-9]{4}E[-+][0-9]{2} \| total examples: 6\.0000E\+00 \| avg accuracy: ' \
  "$work/err.txt" || fail "no Megatron LAMBADA result line"
grep -q '^done :-)$' "$work/err.txt" || fail "no final line"
! grep -q "ignored:" "$work/err.txt" || fail "a warning about tokenizer flags nobody gave"
cp "$work/out.txt" "$work/loose.json"
# A tokenizer flag that the recorded tokenizer does not take is said to be ignored.
expect_status 0 "$bin/mgt-eval" "${lambada[@]}" --micro-batch-size 4 --vocab-size 5000
grep -q "warning: --vocab-size 5000 ignored: the tokenizer recorded in checkpoint .* is .*; pass --tokenizer-type" \
  "$work/err.txt" || fail "an unused --vocab-size not named: $(cat "$work/err.txt")"
expect_status 0 "$bin/mgt-eval" "${lambada[@]}" --strict-lambada --seq-length 16 --micro-batch-size 2 \
  --output "$work/strict.json" --num-layers 2 --hidden-size 32
[[ ! -s "$work/out.txt" ]] || fail "--output still wrote to standard output"
python3 - "$work/loose.json" "$work/strict.json" "$work/ckpt" <<'PY' || fail "LAMBADA JSON"
import json, sys
loose, strict = (json.load(open(p)) for p in sys.argv[1:3])
for r, is_strict in ((loose, False), (strict, True)):
    c = r["counts"]
    assert r["task"] == "LAMBADA" and c["examples"] == 6, r
    assert 0 <= c["correct"] <= 6 and abs(r["accuracy"] - c["correct"] / 6) < 1e-12, r
    assert r["target_ppl"] > 1 and r["settings"]["strict_lambada"] is is_strict, r
    assert r["checkpoint"]["iteration"] == 2 and r["checkpoint"]["directory"].startswith(sys.argv[3]), r
    assert r["settings"]["tokenizer"] == {"type": "GPT2BPETokenizer", "vocab_size": 50257,
                                          "padded_vocab_size": 50304}, r
# Every LAMBADA passage is longer than 33 tokens: all are truncated at both lengths.
assert loose["counts"]["target_tokens"] == 6 and loose["counts"]["truncated"] == 6, loose
assert strict["counts"]["target_tokens"] >= 6 and strict["counts"]["truncated"] == 6, strict
assert strict["settings"]["seq_length"] == 16 and loose["settings"]["seq_length"] == 32
PY

# Results are strict JSON, and --output replaces a symlink at its name instead of writing
# through it.
echo precious >"$work/victim.txt"
ln -s "$work/victim.txt" "$work/result.json"
expect_status 0 "$bin/mgt-eval" "${lambada[@]}" --output "$work/result.json"
[[ $(cat "$work/victim.txt") == precious ]] || fail "--output wrote through a symlink"
[[ -f "$work/result.json" && ! -L "$work/result.json" ]] || fail "--output is still a symlink"
python3 - "$work/result.json" <<'PY' || fail "result is not strict JSON"
import json, sys
def refuse(name):
    raise ValueError("non-standard JSON constant " + name)
json.load(open(sys.argv[1]), parse_constant=refuse)
PY
ls "$work" | grep -q "result.json.tmp" && fail "a temporary was left behind"

# WikiText-103: Megatron's counts and the adjusted perplexity.
expect_status 0 "$bin/mgt-eval" "${wiki[@]}" --overlapping-eval 16 --micro-batch-size 8 --log-interval 1
grep -Eq '^ validation results on WIKITEXT103 \| avg loss: [0-9]\.[0-9]{4}E\+[0-9]{2} \| ppl: .* \| adjusted ppl: .* \| token ratio: [0-9.]+ \|$' \
  "$work/err.txt" || fail "no Megatron WIKITEXT103 result line"
grep -Eq '^ > number of original tokens: [0-9]+, number of detokenized tokens: [0-9]+$' "$work/err.txt" ||
  fail "no token counts"
python3 - "$work/out.txt" "$work/wiki.test.tokens" <<'PY' || fail "WIKITEXT103 JSON"
import json, math, sys
r = json.load(open(sys.argv[1]))
text = open(sys.argv[2], "rb").read().decode("utf-8")
c = r["counts"]
assert r["task"] == "WIKITEXT103", r
assert c["original_tokens"] == len(text.strip().split(" ")), c
T = c["detokenized_tokens"]
assert c["scored_targets"] == T - 1, c
assert c["windows"] == max(math.ceil(max(T - 1 - 16, 0) / 16) + 1, 1), c
assert abs(r["token_ratio"] - (T - 1) / (c["original_tokens"] - 1)) < 1e-12, r
assert abs(r["ppl"] - math.exp(min(20, r["avg_loss"]))) < 1e-9 * r["ppl"], r
assert abs(r["adjusted_ppl"] - math.exp(min(20, r["avg_loss"] * r["token_ratio"]))) < 1e-9 * r["adjusted_ppl"], r
assert r["settings"]["overlapping_eval"] == 16 and r["settings"]["detokenizer"] == "wiki", r
PY

# Errors: one line naming the file (and line), a missing checkpoint, bad and refused flags.
printf '{"text": "a b c"}\n{"text": "a b\n' >"$work/bad.jsonl"
expect_status 1 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/bad.jsonl" --load "$work/ckpt"
tail -n 1 "$work/err.txt" | grep -q "^mgt-eval: $work/bad.jsonl:2: malformed JSON" || fail "malformed line not named"
[[ $(grep -c "^mgt-eval:" "$work/err.txt") == 1 ]] || fail "error is not one line"
# A one-word line leaves nothing to score (Megatron would count it as correct): refused, by line.
printf '{"text": "a b c"}\n{"text": "alone"}\n' >"$work/one_word.jsonl"
expect_status 1 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/one_word.jsonl" --load "$work/ckpt" --strict-lambada
grep -q "^mgt-eval: $work/one_word.jsonl:2: the text is a single word" "$work/err.txt" || fail "one-word line not refused"
# Whitespace alone has no word to predict: refused, by line.
printf '{"text": "a b c"}\n{"text": "  "}\n' >"$work/blank.jsonl"
expect_status 1 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/blank.jsonl" --load "$work/ckpt"
grep -q "^mgt-eval: $work/blank.jsonl:2: the text has no words" "$work/err.txt" || fail "blank line not refused"
# A tokenizer of another size than the training run's: refused, though the padded vocabulary
# would hold it.
expect_status 2 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/lambada_test.jsonl" --load "$work/ckpt" \
  --tokenizer-type BertWordPieceLowerCase --vocab-file "$src/datasets/bert-uncased-vocab.txt"
grep -q "was trained with a tokenizer of 50257 (GPT2BPETokenizer)" "$work/err.txt" || fail "another tokenizer accepted"
# A diverged run's checkpoint (lr 1e30: the weights overflow): mgt-eval writes its result with null
# figures and fails; mgt-generate fails on the first prompt rather than emit token 0.
"$bin/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --micro-batch-size 2 --lr 1e30 --train-iters 2 --log-interval 1 \
  --eval-iters 0 --mock-data "${gpt2[@]}" --save "$work/diverged" --save-interval 2 >/dev/null 2>&1 ||
  fail "could not train the diverged checkpoint"
expect_status 1 "$bin/mgt-eval" --task WIKITEXT103 --valid-data "$work/wiki.test.tokens" --load "$work/diverged"
grep -q '"ppl": null' "$work/out.txt" || fail "the diverged checkpoint's result not written"
tail -n 1 "$work/err.txt" | grep -q "^mgt-eval: checkpoint .*diverged/iter_0000002 scores a loss of NaN" ||
  fail "a NaN perplexity exits 0"
printf '{"prompt": "Hello"}\n' >"$work/hello.jsonl"
expect_status 1 "$bin/mgt-generate" --load "$work/diverged" --prompts "$work/hello.jsonl" --max-new-tokens 2
grep -q "^mgt-generate: .*hello.jsonl:1: prompt 1: the model's logits are NaN or infinite" "$work/err.txt" ||
  fail "a diverged checkpoint generates"
# A FIFO or a directory as the data file is refused at once (a FIFO used to hang the open).
mkfifo "$work/data.fifo"
expect_status 1 timeout 60 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/data.fifo" --load "$work/ckpt"
grep -q "^mgt-eval: '$work/data.fifo' is a FIFO, not a regular file$" "$work/err.txt" || fail "FIFO data not refused"
expect_status 1 timeout 60 "$bin/mgt-eval" --task LAMBADA --valid-data "$work" --load "$work/ckpt"
grep -q "is a directory, not a regular file" "$work/err.txt" || fail "directory data not refused"
: >"$work/empty.jsonl"
expect_status 1 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/empty.jsonl" --load "$work/ckpt"
grep -q "no examples" "$work/err.txt" || fail "empty data not reported"
expect_status 1 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/missing.jsonl" --load "$work/ckpt"
grep -q "missing.jsonl" "$work/err.txt" || fail "missing data file not named"
: >"$work/empty.wiki.tokens"
expect_status 1 "$bin/mgt-eval" --task WIKITEXT103 --valid-data "$work/empty.wiki.tokens" --load "$work/ckpt"
grep -q "perplexity needs at least two" "$work/err.txt" || fail "empty WikiText not reported"
expect_status 1 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/lambada_test.jsonl" --load "$work/nockpt"
grep -q "nockpt: no such directory" "$work/err.txt" || fail "missing checkpoint not named"
# --output's destination is checked first; a --micro-batch-size beyond the data's rows is bounded
# by them in the memory check.
expect_status 1 "$bin/mgt-eval" "${lambada[@]}" --output "$work/no-dir/result.json"
grep -q "no-dir' does not exist" "$work/err.txt" || fail "--output in a missing directory not refused"
expect_status 1 "$bin/mgt-eval" "${lambada[@]}" --output "$work"
grep -q "is a directory" "$work/err.txt" || fail "--output naming a directory not refused"
expect_status 0 "$bin/mgt-eval" "${lambada[@]}" --micro-batch-size 100000000
expect_status 2 "$bin/mgt-eval" "${wiki[@]}" --overlapping-eval 64
grep -q "exceeds --seq-length 32" "$work/err.txt" || fail "stride above seq-length accepted"
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --seq-length 64
grep -q "max-position-embeddings 32" "$work/err.txt" || fail "seq-length above positions accepted"
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --hidden-size 64
grep -q -- "--hidden-size 64 disagrees with checkpoint" "$work/err.txt" || fail "disagreeing model flag accepted"
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --epochs 1
grep -q -- "--epochs is not supported by mgt-eval" "$work/err.txt" || fail "--epochs not refused"
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --task RACE
expect_status 2 "$bin/mgt-eval" --task LAMBADA --load "$work/ckpt"
grep -q -- "--valid-data is required" "$work/err.txt" || fail "missing --valid-data not named"
# A usage error is one line naming the flag, and exit 2: an unknown flag, a bad value.
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --no-such-flag
[[ $(wc -l <"$work/err.txt") == 1 ]] && grep -q -- "unknown flag --no-such-flag" "$work/err.txt" ||
  fail "unknown flag not refused on one line"
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --micro-batch-size 0
[[ $(wc -l <"$work/err.txt") == 1 ]] && grep -q -- "--micro-batch-size must be" "$work/err.txt" ||
  fail "bad --micro-batch-size not named on one line"
expect_status 2 "$bin/mgt-eval" "${lambada[@]}" --num-layers x
grep -q -- "--num-layers" "$work/err.txt" || fail "bad --num-layers not named"
echo "mgt-eval e2e: ok"
