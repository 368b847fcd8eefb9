#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# a Mixtral-style model (16 layers, hidden 2048, GQA 8, sequence 4096, 8 experts of ffn 5632,
# top-2, alltoall dispatcher, SwiGLU, RMSNorm, RoPE) against its dense equivalent (ffn 11264:
# the same active FLOPs per token) on one GPU in bf16, the experts as grouped GEMMs and as one
# GEMM each, 32 micro-batches of 1 per step (the optimizer's step over 4.4B parameters spread as
# a global batch spreads it); the MoE step's per-operation profile (--profile); then a short
# table (tokens/s by the log line and by the log's time stamps, and the MoE/dense ratios). Logs
# under $OUT (or /tmp/moe-speed).
# --peer: then the same model and global batch in Megatron-Core on the same GPU
# (tools/bench/mcore_peer_gpu.py --preset mixtral-small: its local spec's MoE layer, the experts
# as SequentialMLP, bf16, 3 warm-up and --iters timed iterations; the megatron-core wheel from
# .whl, or $PEER_WHEELS, installed into /tmp/site; stopped after $PEER_TIMEOUT seconds, default
# 420), its tokens/s and the mgt MoE / peer ratios added to the table. --peer-extra passes flags
# to the peer only (e.g. "--num-layers 8" for a quicker try; the table names the layers). For
# checking the peer's part without a GPU: PEER_DEVICE=cpu PYTHONPATH=DIR (torch and megatron-core
# there; nothing installed) and --peer-extra "--preset tiny-moe --fp32".
# --micro-batch N: N sequences per micro-batch (default 1; the global batch stays in sequences).
# --runs "dense moe": only those of the three runs (dense, moe, moe_loop).
# --ep N (a machine of N GPUs): then the MoE model with --expert-model-parallel-size N over N ranks
# (NCCL), the same tokens per GPU (the global batch times N), the distributed optimizer with both
# overlaps as Megatron's Mixtral script has them: its tokens/s per GPU against the one-GPU MoE run,
# and the all-to-all's time per iteration (CUDA events; exposed: not hidden behind computation).
# --ep-extra "FLAGS": flags for that run only (e.g. --delay-wgrad-compute, which needs EP > 1).
#   tools/gpu/moe_speed.sh [--iters N] [--global-batch N] [--micro-batch N] [--runs "NAMES"] [--profile]
#                          [--extra "FLAGS"] [--peer] [--peer-extra "FLAGS"] [--ep N] [--ep-extra "FLAGS"]
set -uo pipefail
cd "$(dirname "$0")/../.."
# The peer runs under the machine's own library path, not the pack's (PyTorch brings its own CUDA
# libraries).
peer_ld_set=${LD_LIBRARY_PATH+1}
peer_ld=${LD_LIBRARY_PATH-}
source tools/gpu/devpack_env.bash
out=${OUT:-/tmp/moe-speed}
mkdir -p "$out"
iters=6; global=32; micro=1; runs="dense moe moe_loop"; profile=0; extra=(); peer=0; peer_extra=(); ep=1; ep_extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --iters) iters=$2; shift 2 ;;
    --global-batch) global=$2; shift 2 ;;
    --micro-batch) micro=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --profile) profile=1; shift ;;
    --extra) read -r -a extra <<< "$2"; shift 2 ;;
    --peer) peer=1; shift ;;
    --ep) ep=$2; shift 2 ;;
    --peer-extra) read -r -a peer_extra <<< "$2"; shift 2 ;;
    --ep-extra) read -r -a ep_extra <<< "$2"; shift 2 ;;
    *) echo "moe_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
common=(--device cuda --bf16 --num-layers 16 --hidden-size 2048 --num-attention-heads 16
        --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096
        --position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights
        --disable-bias-linear --micro-batch-size "$micro" --global-batch-size "$global" --lr 3e-4 --eval-iters 0
        --hidden-dropout 0 --attention-dropout 0 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000
        --log-interval 2 --log-throughput --data-cache-path "$out/cache")
moe=(--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 5632 --moe-aux-loss-coeff 1e-2
     --moe-token-dispatcher-type alltoall --moe-grouped-gemm --ffn-hidden-size 5632)
# The experts one GEMM each instead of cuBLAS's grouped GEMM (--moe-grouped-gemm left out).
moe_loop=("${moe[@]/--moe-grouped-gemm}")
dense=(--ffn-hidden-size 11264)
table=()
# rate LOG: tokens/s by the last logged time per iteration, and the wall clock's between the log
# lines of the second half of the run (from the first logged iteration at or past half of them to
# the last): the first iterations time the GEMM plans of each new shape, which a mixture's changing
# row counts keep making.
rate() {
  python3 - "$1" "$((global * 4096))" <<'PY'
import datetime, re, sys
log = open(sys.argv[1]).read()
ms = re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", log)
rates = [f"{int(sys.argv[2]) / (float(m) / 1000):.0f}" for m in ms]
stamps = re.findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] iteration\s+(\d+)/", log)
wall = "n/a"
if stamps:
    half = int(stamps[-1][1]) / 2
    stamps = [s for s in stamps if int(s[1]) >= half]
if len(stamps) >= 2:
    (t0, i0), (t1, i1) = stamps[0], stamps[-1]
    s = (datetime.datetime.fromisoformat(t1) - datetime.datetime.fromisoformat(t0)).total_seconds()
    wall = f"{(int(i1) - int(i0)) * int(sys.argv[2]) / s:.0f}"
peak = re.findall(r"max allocated: ([0-9.]+)", log)
print(f"{rates[-1] if rates else 'n/a'} {wall} {peak[-1] if peak else 'n/a'}")
PY
}
for name in $runs; do
  flags=("${common[@]}")
  case $name in
    dense) flags+=("${dense[@]}") ;;
    moe) flags+=("${moe[@]}") ;;
    moe_loop) for f in "${moe_loop[@]}"; do [ -n "$f" ] && flags+=("$f"); done ;;
  esac
  mgt-train "${flags[@]}" "${extra[@]}" --train-iters "$iters" > "$out/$name.log" 2>&1 ||
    { echo "$name failed:"; tail -8 "$out/$name.log"; }
  grep -m1 -E "iteration +$iters/" "$out/$name.log"
  read -r log_rate wall peak <<< "$(rate "$out/$name.log")"
  eval "${name}_rate=$log_rate"
  table+=("$(printf '%-8s %10s tokens/s (log)  %10s (wall clock)  max allocated %s MiB' "$name" "$log_rate" "$wall" "$peak")")
done
if [ "$ep" -gt 1 ]; then
  # The same tokens per GPU: the global batch (the one "--global-batch-size" value of common) times N.
  ep_flags=(); previous=
  for f in "${common[@]}"; do
    if [ "$previous" = --global-batch-size ]; then ep_flags+=("$((global * ep))"); else ep_flags+=("$f"); fi
    previous=$f
  done
  name=moe_ep$ep
  mpiexec.hydra -launcher fork -n "$ep" mgt-train "${ep_flags[@]}" "${moe[@]}" "${extra[@]}" "${ep_extra[@]}" --expert-model-parallel-size "$ep" \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --train-iters "$iters" \
    --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 || { echo "$name failed:"; tail -8 "$out/$name.log"; }
  grep -m1 -E "iteration +$iters/" "$out/$name.log"
  read -r log_rate wall peak <<< "$(global=$((global * ep)) rate "$out/$name.log")"
  comm=$(python3 - "$out/$name.jsonl" <<'PY'
import json, sys
rows = [j for j in map(json.loads, open(sys.argv[1])) if j.get("event") == "train"]
last = rows[-1] if rows else {}
print(f"all-to-all {last.get('expert_parallel_comm_ms', 'n/a')} ms per iteration, "
      f"exposed {last.get('expert_parallel_comm_exposed_ms', 'n/a')} ms")
PY
)
  per_gpu=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / int(sys.argv[2]):.0f}')" "$log_rate" "$ep" 2>/dev/null || echo n/a)
  per_gpu_wall=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / int(sys.argv[2]):.0f}')" "$wall" "$ep" 2>/dev/null || echo n/a)
  table+=("$(printf '%-8s %10s tokens/s per GPU (log)  %10s (wall clock)  max allocated %s MiB; %s' "$name" "$per_gpu" "$per_gpu_wall" "$peak" "$comm")")
  eval "${name}_rate=$per_gpu"
fi
if [ $profile = 1 ]; then
  mgt-train "${common[@]}" "${moe[@]}" "${extra[@]}" --train-iters 4 --profile --profile-step-start 3 \
    --profile-step-end 4 > "$out/profile-moe.log" 2>&1 || tail -5 "$out/profile-moe.log"
  "$py" tools/gpu/profile_steady.py "$out/profile-moe.log" 1 --top 20 | tee "$out/profile-moe.txt"
fi
peer_line=""
if [ $peer = 1 ]; then
  # As tools/gpu/scale_peers.sh: the carried wheel into /tmp/site, then one rank.
  if [ -n "$peer_ld_set" ]; then peer_env=(env LD_LIBRARY_PATH="$peer_ld"); else peer_env=(env -u LD_LIBRARY_PATH); fi
  peer_py=${PYTHON:-python3}  # as scale_peers.sh, whose runs this Python (torch 2.11) made
  peer_device=${PEER_DEVICE:-cuda}
  peer_path=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  [ "$peer_device" = cuda ] || peer_path=${PYTHONPATH:-}
  rm -f "$out/peer.jsonl"
  if [ "$peer_device" != cuda ] || "${peer_env[@]}" "$peer_py" -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --upgrade --target /tmp/site "${PEER_WHEELS:-$PWD/.whl}"/megatron_core-*.whl \
      > "$out/peer-install.log" 2>&1; then
    "${peer_env[@]}" PYTHONPATH="$peer_path" PYTHONUNBUFFERED=1 \
      timeout -k 10 "${PEER_TIMEOUT:-420}" "$peer_py" -m torch.distributed.run --standalone --nproc-per-node 1 \
      tools/bench/mcore_peer_gpu.py --preset mixtral-small --micro-batch 1 --global-batch "$global" \
      --warmup 3 --iters "$iters" --device "$peer_device" --json "$out/peer.jsonl" "${peer_extra[@]}" \
      > "$out/peer.log" 2>&1 ||
      { echo "peer failed (exit $?):"; grep -E "Error|error:|mcore_peer_gpu.py:" "$out/peer.log" | grep -v "^\s*File" | tail -4; }
    grep -E "^  (experts|attention):|ms per iteration" "$out/peer.log"
  else
    echo "peer: installing the megatron-core wheel failed:"; tail -3 "$out/peer-install.log"
  fi
  peer_line=$(python3 - "$out/peer.jsonl" "${moe_rate:-0}" "${moe_loop_rate:-0}" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
except (OSError, IndexError, ValueError):
    print("peer     n/a (no result: see peer.log)"); sys.exit()
rate = r["tokens_per_second"]
print(f"{'peer':<8} {rate:10.0f} tokens/s (Megatron-Core {r['megatron_core']}, torch {r['torch']}, "
      f"{r['num_layers']} layers, {r['timed_iters']} timed iterations)  max allocated {r['max_allocated_mib']:.0f} MiB, "
      f"{r['tflops_per_gpu']:.1f} TFLOP/s on the active experts; experts: {r['experts']}")
def ratio(mgt):
    try:
        return f"{float(mgt) / rate:.3f}"
    except ValueError:
        return "n/a"
print(f"mgt MoE / peer: {ratio(sys.argv[2])}; mgt MoE, experts one GEMM each / peer: {ratio(sys.argv[3])}")
PY
)
fi
echo; echo "== MoE against dense, one GPU, bf16${extra[*]:+ with ${extra[*]}} =="
printf '%s\n' "${table[@]}"
# The ratios of the runs that ran, each against the dense one.
[ -n "${dense_rate:-}" ] && python3 -c "import sys
ratios = [f'{name}: {float(rate) / float(sys.argv[1]):.3f}' for name, rate in zip(sys.argv[2::2], sys.argv[3::2]) if rate]
print('MoE / dense (target >= 0.80): ' + ('; '.join(ratios) or 'no MoE run'))" \
  "$dense_rate" grouped "${moe_rate:-}" "experts one GEMM each" "${moe_loop_rate:-}" 2>/dev/null
if [ "$ep" -gt 1 ]; then
  ep_rate_name=moe_ep${ep}_rate
  python3 -c "import sys; print(f'EP={sys.argv[3]} per GPU / one GPU (target >= 0.85): {float(sys.argv[1]) / float(sys.argv[2]):.3f}')" \
    "${!ep_rate_name:-}" "${moe_rate:-}" "$ep" 2>/dev/null || echo "EP=$ep per GPU / one GPU: needs both runs"
fi
if [ -n "$peer_line" ]; then printf '%s\n' "$peer_line"; fi
