#!/usr/bin/env bash
# On a 4-GPU machine, from the repository root, with the wheels in .whl (megatron-core 0.16.1 and
# torchao 0.17.0; see tools/bench/mcore_peer_gpu.py): installs them into /tmp/site and runs the
# Megatron-Core peer at the Llama 3 8B shape (seq 8192, bf16) with TP=4 and with TP=2 x PP=2,
# micro-batch 1, global batch 8, 3 warm-up and 10 timed iterations, weights initialised on the
# GPUs; each run's log and JSON line go to $OUT (or /tmp/scale-peers), then a short table.
# Each run is stopped after PEER_TIMEOUT seconds (default 160), so the whole stays under 6 minutes.
# Extra arguments are passed to every run (e.g. --num-layers 8 for a quicker try).
# For checking this script without GPUs: PEER_DEVICE=cpu PYTHON=.venv-peer/bin/python (an
# environment with torch and megatron-core; no wheels installed) tools/gpu/scale_peers.sh --preset tiny
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
wheels=${PEER_WHEELS:-$PWD/.whl}
out=${OUT:-/tmp/scale-peers}
mkdir -p "$out"
py=${PYTHON:-python3}
device=${PEER_DEVICE:-cuda}
if [ "$device" = cuda ]; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$wheels"/*.whl || { echo "installing the wheels from $wheels failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  gpus=$($py -c 'import torch; print(torch.cuda.device_count())')
  [ "$gpus" -ge 4 ] || { echo "this needs 4 GPUs, $gpus seen"; exit 1; }
fi
echo "$($py -c 'import torch, megatron.core as m; print("torch", torch.__version__, "megatron-core", m.__version__)' 2>/dev/null)"

run() {  # run NAME FLAGS...
  local name=$1; shift
  local start=$SECONDS
  timeout -k 10 "${PEER_TIMEOUT:-160}" $py -m torch.distributed.run --standalone --nproc-per-node 4 \
    tools/bench/mcore_peer_gpu.py --preset llama3-8b --micro-batch 1 --global-batch 8 --warmup 3 --iters 10 \
    --bf16 --device "$device" --json "$out/results.jsonl" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - start)) s"
  [ $rc -eq 0 ] || grep -E "Error|error:|mcore_peer_gpu.py:" "$out/$name.log" | grep -v "^\s*File" | tail -4
}
rm -f "$out/results.jsonl"
run tp4 --tp 4 "$@"
run tp2pp2 --tp 2 --pp 2 "$@"

$py - "$out/results.jsonl" <<'PY'
import json, sys
try:
    rows = [json.loads(line) for line in open(sys.argv[1])]
except OSError:
    rows = []
print(f"{'layout':<12} {'layers':>6} {'ms/iter':>9} {'tokens/s/GPU':>13} {'TFLOP/s/GPU':>12} {'max alloc MiB':>14}  losses (first, last)")
for r in rows:
    layout = f"TP{r['tp']} PP{r['pp']}" + (f" VP{r['vp']}" if r["vp"] else "") + f" DP{r['dp']}"
    print(f"{layout:<12} {r['num_layers']:>6} {r['seconds_per_iteration'] * 1e3:>9.1f} {r['tokens_per_second_per_gpu']:>13,.0f} "
          f"{r['tflops_per_gpu']:>12.1f} {r['max_allocated_mib']:>14,.0f}  {r['losses'][0]:.4f}, {r['losses'][-1]:.4f}")
if rows:
    print(f"megatron-core {rows[0]['megatron_core']}, torch {rows[0]['torch']}, {rows[0]['precision']}, "
          f"micro-batch {rows[0]['micro_batch']}, global batch {rows[0]['global_batch']}, seq {rows[0]['seq_length']}, "
          f"{rows[0]['timed_iters']} timed iterations after {rows[0]['warmup_iters']}; optimizer: {rows[0]['adam']}")
for r in rows:
    print(f"TP{r['tp']} PP{r['pp']}: attention {r['attention']}; norm {r['norm']}; initialisation {r['init_seconds']} s")
PY
