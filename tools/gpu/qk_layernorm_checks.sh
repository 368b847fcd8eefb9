#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# --qk-layernorm on the GPU. The CUDA tests (the model with query and key norms against the CPU
# among them); the same small Qwen3-style run (RMSNorm, SwiGLU, RoPE, grouped-query attention,
# query and key norms) on the CPU and on the GPU, whose loss curves must agree; GPT 1.3B's shape
# as a Qwen3-style model in bf16 (micro-batch 4) with and without the query and key norms, by the
# log line and by the wall clock of the log's time stamps, and the per-operation profile of the
# run with them. Logs under $OUT (or /tmp/qk-layernorm); a short table last.
#   tools/gpu/qk_layernorm_checks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/qk-layernorm}
mkdir -p "$out"
source tools/gpu/devpack_env.bash
table=()
row() { table+=("$(printf '%-40s %s' "$1" "$2")"); echo "ROW ${table[-1]}"; }

mgt-tests "[cuda]" > "$out/cuda-tests.log" 2>&1
status=$?
row "CUDA tests ([cuda])" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/cuda-tests.log" | tail -1)"
[ $status -eq 0 ] || grep -B5 -A15 FAILED "$out/cuda-tests.log" | head -80
grep "cuda model (llama, q/k\|cuda model (gpt2, q/k" "$out/cuda-tests.log"

# The same run on both devices: fp32, 40 iterations of mock data.
qwen3=(--position-embedding-type rope --rotary-base 1000000 --normalization RMSNorm --norm-epsilon 1e-6 --swiglu
       --disable-bias-linear --group-query-attention --num-query-groups 2 --kv-channels 64 --qk-layernorm
       --untie-embeddings-and-output-weights)
small=(--mock-data --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json
       --merge-file datasets/gpt2-merges.txt --num-layers 4 --hidden-size 256 --num-attention-heads 4
       --seq-length 256 --max-position-embeddings 256 --micro-batch-size 4 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 5 --train-iters 40
       --log-interval 1 --eval-iters 0 --seed 1234 --hidden-dropout 0 --attention-dropout 0)
rm -rf /tmp/qk-ckpt
for device in cpu cuda; do
  save=(); [ $device = cpu ] && save=(--save /tmp/qk-ckpt --save-interval 40)
  mgt-train "${small[@]}" "${qwen3[@]}" "${save[@]}" --device $device --metrics-file "$out/curve-$device.jsonl" \
    > "$out/curve-$device.log" 2>&1 || echo "mgt-train --device $device failed: $(tail -3 "$out/curve-$device.log")"
done
curve=$("$py" - "$out/curve-cpu.jsonl" "$out/curve-cuda.jsonl" <<'PY'
import json, sys
def rows(p):
    return [json.loads(l) for l in open(p) if '"event": "train"' in l]
a, b = rows(sys.argv[1]), rows(sys.argv[2])
if not a or len(a) != len(b):
    print(f"FAIL: {len(a)} vs {len(b)} logged iterations"); sys.exit()
loss = max(abs(x["lm_loss"] - y["lm_loss"]) / abs(x["lm_loss"]) for x, y in zip(a, b))
norm = max(abs(x["grad_norm"] - y["grad_norm"]) / abs(x["grad_norm"]) for x, y in zip(a, b))
print(f"{len(a)} iterations, lm loss {a[0]['lm_loss']:.4f} -> {a[-1]['lm_loss']:.4f}; largest relative difference "
      f"lm loss {loss:.2e}, grad norm {norm:.2e}")
PY
)
row "CPU vs GPU, Qwen3-style, fp32" "$curve"
# Key/value-cached greedy decoding of the CPU's checkpoint on both devices.
printf '{"prompt": "The history of the"}\n{"prompt": "In 1851, the ship"}\n{"prompt": "A"}\n' > "$out/prompts.jsonl"
for device in cpu cuda; do
  mgt-generate --load /tmp/qk-ckpt --prompts "$out/prompts.jsonl" --max-new-tokens 24 --micro-batch-size 3 \
    --device $device --output "$out/generate-$device.jsonl" > "$out/generate-$device.log" 2>&1 ||
    echo "mgt-generate --device $device failed: $(tail -3 "$out/generate-$device.log")"
done
same=$("$py" - "$out/generate-cpu.jsonl" "$out/generate-cuda.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["tokens"] for l in open(p)] for p in sys.argv[1:3])
print(f"{sum(x == y for x, y in zip(a, b))} of {len(a)} completions equal ({sum(map(len, a))} tokens)")
PY
)
row "greedy decoding, CPU vs GPU" "$same"

# GPT 1.3B's sizes as a Qwen3-style model (16 heads of 128 in 8 query groups), bf16.
bench() {  # bench NAME ITERS [FLAGS...]: the benchmark's JSON in $out/NAME-ITERS.json
  local name=$1 iters=$2; shift 2
  "$py" tools/bench/bench_train_gpu.py --bin "$dp/bin" --shape gpt-1.3b --micro-batch 4 --iters "$iters" \
    --precision bf16 --no-peer --extra "$*" --json "$out/$name-$iters.json" > "$out/$name-$iters.log" 2>&1 ||
    tail -5 "$out/$name-$iters.log"
}
shape="--position-embedding-type rope --rotary-base 1000000 --normalization RMSNorm --swiglu --disable-bias-linear
       --group-query-attention --num-query-groups 8 --kv-channels 128 --untie-embeddings-and-output-weights"
bench warm 10 $shape
for run in plain qk plain-again qk-again; do
  flags=$shape; [[ $run == qk* ]] && flags="$shape --qk-layernorm"
  bench $run 40 $flags
  wall=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['wall_tokens_per_second'] or 0))" \
    "$out/$run-40.json" 2>/dev/null)
  row "1.3B Qwen3-style bf16, $run" "$(head -1 "$out/$run-40.log" | grep -oE '[0-9]+ tokens/s, MFU [0-9.]+%'); wall clock $wall tokens/s; max allocated $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['max_allocated_mib']))" "$out/$run-40.json" 2>/dev/null) MiB"
done
# Where the step with the norms goes.
mgt-train --device cuda --bf16 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 4 --lr 3e-4 --train-iters 14 \
  --log-interval 5 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data --tokenizer-type GPT2BPETokenizer \
  --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt $shape --qk-layernorm \
  --profile --profile-step-start 4 --profile-step-end 14 > "$out/profile-qk.log" 2>&1 || tail -5 "$out/profile-qk.log"
"$py" tools/gpu/profile_steady.py "$out/profile-qk.log" 10 --top 25 | tee "$out/profile-qk.txt"
row "profile, 1.3B Qwen3-style, per iteration" "$(sed -n 1p "$out/profile-qk.txt")"

echo
printf '%s\n' "${table[@]}"
