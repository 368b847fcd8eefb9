#!/usr/bin/env bash
# The main job, end to end on bundled data: set up, tokenize a corpus with GPT-2 BPE into
# Megatron's .bin/.idx, build the train/valid/test sample indices, and print a summary.
# Outputs go to runs/main-job/ (or $MGT_WORK_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bin=${MGT_BUILD_DIR:-build}/bin
work=${MGT_WORK_DIR:-runs/main-job}
mkdir -p "$work"

tokenizer=(--tokenizer-type GPT2BPETokenizer
           --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt)

echo "== tokenize datasets/corpus-gutenberg.jsonl" >&2
"$bin/mgt-tokenize" --input datasets/corpus-gutenberg.jsonl --output-prefix "$work/gutenberg" \
  --json-keys text --append-eod --workers "$(nproc)" "${tokenizer[@]}" > "$work/tokenize.json"

echo "== build sample indices" >&2
"$bin/mgt-index" --data-path "$work/gutenberg_text_document" --split 969,30,1 \
  --seq-length 256 --train-iters 2000 --global-batch-size 16 --eval-interval 200 --eval-iters 10 \
  --seed 1234 --data-cache-path "$work/index-cache" "${tokenizer[@]}" > "$work/index.json"

echo "== summary" >&2
echo "tokenize: $(cat "$work/tokenize.json")"
echo "index:    $(cat "$work/index.json")"
