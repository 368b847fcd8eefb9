#!/usr/bin/env bash
# The main job, end to end on bundled data: set up, tokenize a corpus with GPT-2 BPE into
# Megatron's .bin/.idx, build the train/valid/test sample indices, pretrain a small GPT with
# checkpoints (on a GPU when one is visible, on the CPU otherwise: about two minutes there), evaluate it zero-shot (LAMBADA, and WikiText-103
# on the first 1000 lines of its test set to keep the job short), export it to Hugging Face
# format, complete a few prompts, and print a summary, with the loss curves drawn as an SVG image.
# Outputs go to runs/main-job/ (or $MGT_WORK_DIR); a second run starts afresh.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bin=${MGT_BUILD_DIR:-build}/bin
work=${MGT_WORK_DIR:-runs/main-job}
rm -rf "$work"
mkdir -p "$work"

tokenizer=(--tokenizer-type GPT2BPETokenizer
           --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt)

echo "== tokenize datasets/corpus-gutenberg.jsonl" >&2
"$bin/mgt-tokenize" --input datasets/corpus-gutenberg.jsonl --output-prefix "$work/gutenberg" \
  --json-keys text --append-eod --workers "$(nproc)" "${tokenizer[@]}" > "$work/tokenize.json"

# The same data and sizes for mgt-index and mgt-train, so training finds the indices cached.
eval_interval=30
data=(--data-path "$work/gutenberg_text_document" --split 969,30,1 --seq-length 128
      --train-iters 60 --global-batch-size 16 --eval-interval "$eval_interval" --eval-iters 4 --seed 1234
      --data-cache-path "$work/index-cache")

echo "== build sample indices" >&2
"$bin/mgt-index" "${data[@]}" "${tokenizer[@]}" > "$work/index.json"

# --device auto (the default) takes a GPU when the build has CUDA and one is visible.
echo "== pretrain a small GPT" >&2
"$bin/mgt-train" "${data[@]}" "${tokenizer[@]}" \
  --num-layers 2 --hidden-size 128 --num-attention-heads 4 --max-position-embeddings 128 \
  --micro-batch-size 8 --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 10 \
  --weight-decay 0.1 --clip-grad 1.0 --log-interval 10 --log-throughput \
  --save "$work/checkpoints" --save-interval 30 --metrics-file "$work/metrics.jsonl" \
  | tee "$work/train.log"

ckpt=$work/checkpoints
echo "== evaluate zero-shot: LAMBADA" >&2
"$bin/mgt-eval" --task LAMBADA --valid-data datasets/lambada_test.jsonl --load "$ckpt" \
  --micro-batch-size 16 --output "$work/lambada.json"
echo "== evaluate zero-shot: WikiText-103 (test, first 1000 lines)" >&2
# Megatron picks the detokenizer by the file name, so the excerpt keeps "wiki" in it.
head -n 1000 datasets/wikitext-103.wiki.test.tokens > "$work/wikitext-103.wiki.test.head.tokens"
"$bin/mgt-eval" --task WIKITEXT103 --valid-data "$work/wikitext-103.wiki.test.head.tokens" --load "$ckpt" \
  --micro-batch-size 16 --output "$work/wikitext103.json"

echo "== export to Hugging Face format" >&2
"$bin/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$ckpt" \
  --save-dir "$work/hf-export" > "$work/export.json"

echo "== complete prompts" >&2
printf '%s\n' '{"prompt": "It was a dark and stormy night, and"}' '{"prompt": "The old man looked at"}' \
  '{"prompt": "CHAPTER I."}' > "$work/prompts.jsonl"
"$bin/mgt-generate" --load "$ckpt" --prompts "$work/prompts.jsonl" --output "$work/completions.jsonl" \
  --max-new-tokens 32 --top-k 0 --top-p 0.9 --temperature 0.8 --seed 1234

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
python3 - "$work/metrics.jsonl" "$eval_interval" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
eval_interval = int(sys.argv[2])
train = [r for r in rows if r["event"] == "train"]
# Each train row averages the iterations since the one before: weigh its rate by their time.
seconds = tokens = 0.0
previous = 0
for r in train:
    interval_s = r["elapsed_ms_per_iteration"] / 1000 * (r["iteration"] - previous)
    seconds += interval_s
    tokens += r["tokens_per_second"] * interval_s
    previous = r["iteration"]
print(f"trained    {train[-1]['iteration']} iterations, {tokens / seconds:.0f} tokens/s averaged over the run "
      f"({train[-1]['tokens_per_second']:.0f} at the end): lm loss {train[0]['lm_loss']:.3f} (iteration {train[0]['iteration']}) -> {train[-1]['lm_loss']:.3f}")
# mgt-train, like Megatron, validates every --eval-interval iterations during training and once
# more on the final model; both are "validation" rows, the periodic one first where they share
# an iteration.
periodic_seen = set()
for r in rows:
    if r["event"] == "train":
        continue
    if r["event"] == "validation":
        periodic = r["iteration"] % eval_interval == 0 and r["iteration"] not in periodic_seen
        if periodic:
            periodic_seen.add(r["iteration"])
        what = "validation (periodic)" if periodic else "validation (final)"
    else:
        what = r["event"] + " (final)"
    print(f"{what:<22} iteration {r['iteration']}: lm loss {r['lm_loss']:.3f}, ppl {r['lm_loss_ppl']:.1f}")
PY
tools/plot_loss_curves.py "$work/metrics.jsonl" "$work/loss-curves.svg"
echo "loss curves $work/loss-curves.svg (train and validation lm loss against iteration)"
echo "device     $(sed -n 's/^> compute device: //p' "$work/train.log" | head -1)"
echo "checkpoint $(cat "$ckpt/latest_checkpointed_iteration.txt") in $ckpt"
python3 - "$work/lambada.json" "$work/wikitext103.json" "$work/export.json" "$work/completions.jsonl" <<'PY'
import json, sys
lam, wiki, export = (json.load(open(p)) for p in sys.argv[1:4])
c = lam["counts"]
print(f"LAMBADA    accuracy {lam['accuracy']:.4f} ({c['correct']} of {c['examples']}), "
      f"target perplexity {lam['target_ppl']:.1f}, {c['truncated']} examples truncated")
print(f"WikiText   ppl {wiki['ppl']:.1f}, adjusted ppl {wiki['adjusted_ppl']:.1f}, "
      f"token ratio {wiki['token_ratio']:.4f} (first 1000 lines of the test set)")
print("meaning    a model trained for two minutes has barely begun to learn English: these figures show that "
      "the zero-shot pipeline runs, not a useful model (GPT-2 small scores about 46% and ppl 37 on them)")
print(f"exported   {export['parameters']} parameters to {export['destination']['path']} (Hugging Face GPT-2: config.json, model.safetensors)")
for line in open(sys.argv[4]):
    r = json.loads(line)
    print(f"generated  {r['prompt']!r} -> {r['text']!r}")
PY
