#!/usr/bin/env bash
# End-to-end checks that older Megatron scripts, which give --vocab-file and --merge-file but no
# --tokenizer-type, run unchanged: every program taking tokenizer flags uses GPT2BPETokenizer and
# says so in one line on standard error. mgt-eval and mgt-generate do so only for a checkpoint
# that records no tokenizer (an import from Hugging Face); a recorded one is used silently.
# Usage: bash tests/e2e/tokenizer_type_inference.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

files=(--vocab-file "$src/datasets/gpt2-vocab.json" --merge-file "$src/datasets/gpt2-merges.txt")
said() {  # said PROGRAM: the one inference line, naming its program, is on standard error
  [[ $(grep -c 'select GPT2BPETokenizer' "$work/err.txt") == 1 ]] || fail "$1: no single inference line: $(cat "$work/err.txt")"
  grep -q "^$1: no --tokenizer-type given; --vocab-file and --merge-file select GPT2BPETokenizer" "$work/err.txt" ||
    fail "$1: inference line: $(grep GPT2BPE "$work/err.txt")"
}
silent() {
  ! grep -q 'select GPT2BPETokenizer' "$work/err.txt" || fail "$1 inferred a tokenizer it was given or had recorded"
}

# mgt-tokenize writes the same files as with the type named.
corpus="$src/datasets/corpus-tinyshakespeare.jsonl"
expect_status 0 "$bin/mgt-tokenize" --input "$corpus" --output-prefix "$work/inferred" "${files[@]}" --append-eod --quiet
said mgt-tokenize
expect_status 0 "$bin/mgt-tokenize" --input "$corpus" --output-prefix "$work/named" "${files[@]}" --append-eod --quiet \
  --tokenizer-type GPT2BPETokenizer
silent mgt-tokenize
cmp "$work/inferred_text_document.bin" "$work/named_text_document.bin" || fail "inferred tokenizer wrote other tokens"

# A file alone names no tokenizer: the usual error stands.
expect_status 2 "$bin/mgt-tokenize" --input "$corpus" --output-prefix "$work/vocab_only" \
  --vocab-file "$src/datasets/gpt2-vocab.json" --quiet
grep -q -- '--tokenizer-type is required' "$work/err.txt" || fail "vocab file alone: $(cat "$work/err.txt")"

expect_status 0 "$bin/mgt-index" --data-path "$work/inferred_text_document" --seq-length 64 --train-iters 4 \
  --global-batch-size 4 --eval-iters 1 --eval-interval 4 "${files[@]}" --data-cache-path "$work/cache"
said mgt-index

expect_status 0 "$bin/mgt-train" --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 \
  --max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 --train-iters 1 \
  --eval-iters 0 --mock-data "${files[@]}" --save "$work/ckpt" --save-interval 1 --device cpu
said mgt-train

# The trained checkpoint records its tokenizer; an export and re-import records none.
expect_status 0 "$bin/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$work/ckpt" \
  --save-dir "$work/hf"
expect_status 0 "$bin/mgt-ckpt-convert" --model-type GPT --loader hf --saver mgt --load-dir "$work/hf" \
  --save-dir "$work/imported"

echo '{"prompt": "Hello"}' >"$work/prompts.jsonl"
generate=("$bin/mgt-generate" --prompts "$work/prompts.jsonl" --max-new-tokens 2 --device cpu)
expect_status 0 "${generate[@]}" --load "$work/ckpt" "${files[@]}"
silent mgt-generate
expect_status 0 "${generate[@]}" --load "$work/imported" "${files[@]}"
said mgt-generate
expect_status 2 "${generate[@]}" --load "$work/imported"
grep -q 'does not record its tokenizer' "$work/err.txt" || fail "no tokenizer at all: $(cat "$work/err.txt")"

printf '%s\n' '{"text": "the cat sat on the mat"}' '{"text": "a dog ran in the park"}' >"$work/lambada.jsonl"
expect_status 0 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/lambada.jsonl" --load "$work/imported" \
  "${files[@]}" --device cpu --output "$work/results.json"
said mgt-eval
echo "older scripts' tokenizer flags run unchanged"
