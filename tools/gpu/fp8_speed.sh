#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# the FP8 and CUDA operation tests, then GPT 1.3B (micro-batch 4) in bf16 and in FP8 (hybrid,
# delayed scaling) by the benchmark's log line and by wall clock (runs of 20 and 60 iterations
# after one that builds the mock data's indices, the difference of their times), the FP8 step's
# per-operation profile, and a short table last. Logs under $OUT (or /tmp/fp8-speed).
#   tools/gpu/fp8_speed.sh [--peer]   --peer: the PyTorch peer too (compiled), bf16 and torchao FP8
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/fp8-speed}
mkdir -p "$out"
source tools/gpu/devpack_env.bash
table=()
row() { table+=("$(printf '%-34s %s' "$1" "$2")"); }
peer=--no-peer; [ "${1:-}" = --peer ] && peer=

mgt-tests "[fp8]" > "$out/fp8-tests.log" 2>&1
status=$?
row "FP8 tests ([fp8])" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/fp8-tests.log" | tail -1)"
mgt-tests "backend operations*" > "$out/op-tests.log" 2>&1
status=$?
row "every backend operation" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/op-tests.log" | tail -1)"
[ $status -eq 0 ] || grep -B5 -A10 FAILED "$out/op-tests.log" | head -60

bench() {  # bench NAME ITERS [FLAGS...]: the benchmark's JSON in $out/NAME-ITERS.json, seconds beside it
  local name=$1 iters=$2; shift 2
  local t0; t0=$(date +%s.%N)
  "$py" tools/bench/bench_train_gpu.py --bin "$dp/bin" --shape gpt-1.3b --micro-batch 4 --iters "$iters" \
    --precision bf16 "$@" --json "$out/$name-$iters.json" > "$out/$name-$iters.log" 2>&1 || tail -5 "$out/$name-$iters.log"
  python3 -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$t0" > "$out/$name-$iters.seconds"
}
for precision in bf16 fp8; do
  flags=(--no-peer); [ $precision = fp8 ] && flags=(--no-peer --fp8 hybrid)
  bench $precision 10 "${flags[@]}"  # builds the mock data's indices, warms the GPU
  bench $precision 20 "${flags[@]}"
  bench $precision 60 "${flags[@]}"
  wall=$(python3 -c "import sys; print(round(40 * 4 * 2048 / (float(sys.argv[1]) - float(sys.argv[2]))))" \
    "$(cat "$out/$precision-60.seconds")" "$(cat "$out/$precision-20.seconds")")
  head -1 "$out/$precision-60.log"
  row "gpt-1.3b mbs 4 $precision" "$(head -1 "$out/$precision-60.log" | grep -oE '[0-9]+ tokens/s, MFU [0-9.]+%, peak [0-9]+ MiB'); max allocated $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['max_allocated_mib'])" "$out/$precision-60.json" 2>/dev/null) MiB; wall clock $wall tokens/s"
done
if [ -z "$peer" ]; then
  # The PyTorch peer of the same model (compiled, DDP on one GPU) in bf16 and with torchao's FP8
  # training (tensorwise), in this call; torchao travels as a wheel in .whl.
  if [ -d .whl ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site
  fi
  for fp8 in none torchao; do
    extra=(); [ $fp8 = torchao ] && extra=(--fp8 torchao)
    "$py" tools/bench/ddp_peer_gpu.py --gpus 1 --shape gpt-1.3b --micro-batch 4 --iters 30 "${extra[@]}" \
      --json "$out/peer.jsonl" > "$out/peer-$fp8.log" 2>&1 || tail -5 "$out/peer-$fp8.log"
  done
  while read -r line; do
    row "peer $(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(j['fp8'] or 'bf16')" "$line")" \
      "$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(f\"{j['tokens_per_second']:.0f} tokens/s, max allocated {j['peak_mib']:.0f} MiB, torch {j['torch']}\")" "$line")"
  done < "$out/peer.jsonl"
fi

model=(--device cuda --bf16 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
       --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 4 --lr 3e-4 --train-iters 14
       --log-interval 14 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data
       --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt
       --profile --profile-step-start 4 --profile-step-end 14)
mgt-train "${model[@]}" --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max \
  > "$out/profile-fp8.log" 2>&1 || tail -5 "$out/profile-fp8.log"
"$py" tools/gpu/profile_steady.py "$out/profile-fp8.log" 10 --top 25 | tee "$out/profile-fp8.txt"
row "profile, 1.3B FP8, per iteration" "$(sed -n 1p "$out/profile-fp8.txt")"

echo
printf '%s\n' "${table[@]}"
