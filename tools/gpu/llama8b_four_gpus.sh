#!/usr/bin/env bash
# On a 4-GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# the Llama 3 8B shape (32 layers × 4096, FFN 14336, 32 heads in 8 query groups, vocabulary
# 128,256, sequence 8192, RoPE base 500,000, RMSNorm, SwiGLU, no biases, untied embeddings) on
# mock data, micro-batch 1, global batch 8, the distributed optimizer with both its overlaps as
# Megatron's Llama 3 8B script has them (they act where CP × DP > 1), in the layouts named (default:
# "tp4-bf16 tp2pp2-bf16 tp2pp2-fp8 tp4-fp8"), ITERS iterations each (MGT_ITERS, default 12). For
# each: tokens/s per GPU and TFLOP/s per GPU (Megatron's formula) of the log's steady iterations
# (from the 4th), the wall-clock rate of the run, the layout planner's estimate of the step
# (mgt-train --dry-run) beside the measured one, and the largest memory any GPU held. A table last.
# MGT_SEQ sets the sequence length (default 8192; 32768 for long context with a CP layout). Logs
# under $OUT (or /tmp/llama8b).
#   tools/gpu/llama8b_four_gpus.sh [LAYOUT...]   LAYOUT: tp4|tp2pp2|tp2pp2vp2|pp4|pp4vp2|tp2cp2|cp4 -bf16|-fp8
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/llama8b}
mkdir -p "$out"
source tools/gpu/devpack_env.bash
iters=${MGT_ITERS:-12}
seq=${MGT_SEQ:-8192}
layouts=${*:-tp4-bf16 tp2pp2-bf16 tp2pp2-fp8 tp4-fp8}
model=(--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention
       --num-query-groups 8 --seq-length "$seq" --max-position-embeddings "$seq" --position-embedding-type rope
       --rotary-base 500000 --normalization RMSNorm --swiglu --disable-bias-linear
       --untie-embeddings-and-output-weights --tokenizer-type NullTokenizer --vocab-size 128256
       --micro-batch-size 1 --global-batch-size 8 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine
       --lr-warmup-iters 2 --train-iters "$iters" --log-interval 1 --eval-iters 0 --hidden-dropout 0
       --attention-dropout 0 --mock-data --data-cache-path /tmp/llama8b-cache --bf16 --device cuda
       --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --log-throughput)
fp8=(--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max)
table=()
row() { table+=("$(printf '%-14s %s' "$1" "$2")"); printf '%s\n' "${table[-1]}"; }
for name in $layouts; do
  layout=()
  case ${name%-*} in
    tp4) layout=(--tensor-model-parallel-size 4 --sequence-parallel) ;;
    tp2pp2) layout=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel) ;;
    tp2pp2vp2) layout=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel
                       --num-layers-per-virtual-pipeline-stage 8) ;;
    pp4) layout=(--pipeline-model-parallel-size 4) ;;
    pp4vp2) layout=(--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4) ;;
    tp2cp2) layout=(--tensor-model-parallel-size 2 --context-parallel-size 2 --sequence-parallel) ;;
    cp4) layout=(--context-parallel-size 4) ;;
    *) echo "unknown layout $name"; continue ;;
  esac
  precision=(); [ "${name##*-}" = fp8 ] && precision=("${fp8[@]}")
  mgt-train "${model[@]}" "${layout[@]}" "${precision[@]}" --dry-run --world-size 4 > "$out/$name-plan.log" 2>&1
  estimate=$(grep -oE 'estimated step: [0-9.]+ s' "$out/$name-plan.log" | head -1 | grep -oE '[0-9.]+')
  # The largest memory any GPU held while the run went on.
  ( peak=0; while sleep 0.5; do
      m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sort -n | tail -1)
      [ "${m:-0}" -gt "$peak" ] && peak=$m && echo "$peak" > "$out/$name.peak"; done ) &
  watcher=$!
  t0=$(date +%s.%N)
  mpiexec.hydra -launcher fork -n 4 mgt-train "${model[@]}" "${layout[@]}" "${precision[@]}" \
    --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; }
  t1=$(date +%s.%N)
  kill $watcher 2>/dev/null; wait $watcher 2>/dev/null
  python3 - "$out/$name.jsonl" "$t0" "$t1" "${estimate:-nan}" "$(cat "$out/$name.peak" 2>/dev/null || echo 0)" "$seq" > "$out/$name.row" <<'PY'
import json, sys
path, t0, t1, estimate, peak = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
seq = int(sys.argv[6])
try:
    rows = [j for j in map(json.loads, open(path)) if j.get("event") == "train"]
except OSError:
    rows = []
steady = [r for r in rows if r["iteration"] >= 4]
if not steady:
    print("no steady iterations logged"); sys.exit()
tok = sum(r["tokens_per_second"] for r in steady) / len(steady) / 4
tflops = sum(r["tflops_per_gpu"] for r in steady) / len(steady)
step = 8 * seq / (tok * 4)
print(f"{tok:,.0f} tokens/s/GPU, {tflops:.0f} TFLOP/s/GPU ({tflops / 989:.1%} of 989), step {step:.2f} s "
      f"(planner {estimate:.2f} s), loss {rows[-1]['lm_loss']:.3f} at {rows[-1]['iteration']}, peak {peak:,} MiB, "
      f"run {t1 - t0:.0f} s wall")
PY
  row "$name" "$(cat "$out/$name.row")"
done
echo
printf '%s\n' "${table[@]}"
