#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# --moe-router-dtype fp64 on the GPU. The backend operations (the fp64 gating layer among them,
# against the CPU) and the cancellation test; a small MoE model (8 experts, top-2, z-loss, a shared
# expert) trained 20 iterations in fp32 on the CPU and the GPU with the fp64 router (the same
# curve), and in bf16 on the GPU with the fp32 and the fp64 router; then the Mixtral-style model of
# tools/gpu/moe_speed.sh with the fp32 and the fp64 router (tokens/s), and the fp64 one's profile
# (the gate's fp64 kernels per iteration). A short table last; logs under $OUT (or /tmp/router-fp64).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/router-fp64}
mkdir -p "$out"
source tools/gpu/devpack_env.bash
table=()
row() { table+=("$(printf '%-44s %s' "$1" "$2")"); }

for filter in "backend operations*" "the fp64 gating*" "[cuda][moe]"; do
  mgt-tests "$filter" > "$out/tests.log" 2>&1
  status=$?
  row "mgt-tests \"$filter\"" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/tests.log" | tail -1)"
  [ $status -eq 0 ] || grep -B5 -A10 FAILED "$out/tests.log" | head -40
done

small=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
       --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
       --mock-data --train-iters 20 --log-interval 1 --eval-iters 0 --position-embedding-type rope
       --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
       --hidden-dropout 0 --attention-dropout 0 --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2
       --moe-z-loss-coeff 1e-3 --moe-ffn-hidden-size 96 --moe-shared-expert-intermediate-size 64
       --moe-token-dispatcher-type alltoall --tokenizer-type NullTokenizer --vocab-size 127 --deterministic-mode)
run() {  # run NAME FLAGS...: $out/NAME.jsonl
  local name=$1; shift
  mgt-train "${small[@]}" "$@" --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 || tail -5 "$out/$name.log"
}
run cpu-fp64 --device cpu --moe-router-dtype fp64
run gpu-fp64 --device cuda --moe-router-dtype fp64
run gpu-bf16 --device cuda --bf16
run gpu-bf16-fp64 --device cuda --bf16 --moe-router-dtype fp64
compare() {  # compare A B: the largest relative differences over the iterations
  "$py" - "$out/$1.jsonl" "$out/$2.jsonl" <<'PY'
import json, sys
a, b = ({j["iteration"]: j for j in map(json.loads, open(p)) if j.get("event") == "train"} for p in sys.argv[1:])
keys = sorted(k for k in a if k in b)
worst = {f: max(abs(a[k][f] - b[k][f]) / abs(a[k][f]) for k in keys) for f in ("lm_loss", "load_balancing_loss", "z_loss", "grad_norm")}
print(f"{len(keys)} iterations: " + ", ".join(f"{f} {v:.2e}" for f, v in worst.items()))
PY
}
row "fp32 model, fp64 router: CPU / GPU" "$(compare cpu-fp64 gpu-fp64)"
row "bf16 on the GPU: fp32 router / fp64 router" "$(compare gpu-bf16 gpu-bf16-fp64)"

OUT="$out/speed" tools/gpu/moe_speed.sh --runs moe --iters 8 > "$out/speed-fp32.log" 2>&1
row "Mixtral-style, fp32 router" "$(grep -E '^moe ' "$out/speed-fp32.log" | tail -1)"
OUT="$out/speed64" tools/gpu/moe_speed.sh --runs moe --iters 8 --profile --extra "--moe-router-dtype fp64" \
  > "$out/speed-fp64.log" 2>&1
row "Mixtral-style, fp64 router" "$(grep -E '^moe ' "$out/speed-fp64.log" | tail -1)"
grep -E 'linear_(forward|backward)_fp64|^[0-9.]+ ms' "$out/speed64/profile-moe.txt" | head -4

echo
printf '%s\n' "${table[@]}"
