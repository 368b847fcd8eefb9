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

echo "== summary (full JSON: $work/tokenize.json, $work/index.json)"
python3 - "$work/tokenize.json" "$work/index.json" <<'PY'
import json, sys
tok = json.load(open(sys.argv[1]))
for out in tok["outputs"]:
    print(f"tokenized  {tok['documents']} documents, {out['tokens']} tokens "
          f"({tok['input_bytes'] / 1e6:.1f} MB of JSON in {tok['seconds']:.2f} s) -> {out['prefix']}.bin/.idx")
for split, s in json.load(open(sys.argv[2]))["splits"].items():
    if s is None:
        continue
    epochs = max(d["epochs"] for d in s["datasets"])
    print(f"{split:<10} {s['requested']} samples requested, {s['samples']} built, {epochs} epoch(s)")
PY
