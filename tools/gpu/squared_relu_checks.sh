#!/usr/bin/env bash
# --squared-relu (Megatron's squared ReLU MLP, Nemotron-4's) where CI cannot check it, on the GPU
# machine from the repository root with .devpack from tools/gpu/pack.sh:
#   1. its CUDA kernels and the CUDA model against the CPU: mgt-tests' "[cuda]" cases and the
#      backend operations on every storage type;
#   2. a 4-layer model on Megatron's mock data, 40 iterations: the GPU in fp32 against the CPU,
#      and the GPU in bf16 and in FP8 (hybrid, delayed) against the GPU in fp32, by their lm loss
#      (tools/gpu/compare_losses.py);
# Prints a short table last.
#   tools/gpu/squared_relu_checks.sh
set -euo pipefail
source tools/gpu/devpack_env.bash
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cuda_tests=$(mgt-tests "[cuda]" 2>&1 | tail -2 | tr '\n' ' ')
ops_tests=$(mgt-tests "backend operations*" 2>&1 | tail -2 | tr '\n' ' ')

model=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 256
       --micro-batch-size 4 --global-batch-size 16 --lr 3e-4 --train-iters 40 --log-interval 5 --eval-iters 0
       --mock-data --tokenizer-type NullTokenizer --vocab-size 1023 --squared-relu --disable-bias-linear
       --attention-dropout 0 --hidden-dropout 0 --seed 1234 --deterministic-mode)
run() {  # NAME FLAGS...
  local name=$1
  shift
  mgt-train "${model[@]}" "$@" --metrics-file "$work/$name.jsonl" >"$work/$name.out" 2>&1 ||
    { tail -5 "$work/$name.out"; echo "$name failed"; }
}
run cpu --device cpu
run gpu --device cuda
run bf16 --device cuda --bf16
run fp8 --device cuda --bf16 --fp8-format hybrid --fp8-amax-history-len 16 --fp8-amax-compute-algo max

echo
echo "| check | result |"
echo "|---|---|"
echo "| mgt-tests \"[cuda]\" | $cuda_tests |"
echo "| mgt-tests \"backend operations*\" | $ops_tests |"
echo "| GPU fp32 against CPU fp32 | $(python3 tools/gpu/compare_losses.py "$work/cpu.jsonl" "$work/gpu.jsonl") |"
echo "| GPU bf16 against GPU fp32 | $(python3 tools/gpu/compare_losses.py "$work/gpu.jsonl" "$work/bf16.jsonl") |"
echo "| GPU FP8 against GPU fp32 | $(python3 tools/gpu/compare_losses.py "$work/gpu.jsonl" "$work/fp8.jsonl") |"
echo "| lm loss at 5 and 40 (cpu, gpu, bf16, fp8) | $(for r in cpu gpu bf16 fp8; do python3 -c "
import json,sys
l={r['iteration']:r['lm_loss'] for r in map(json.loads,open(sys.argv[1])) if r.get('event')=='train'}
print(f\"{l.get(5,float('nan')):.4f}->{l.get(40,float('nan')):.4f}\", end=' ')" "$work/$r.jsonl"; done) |"
