#!/usr/bin/env bash
# On a machine of N GPUs (default 2), from the repository root, with .devpack/pack.tar.xz from
# tools/gpu/pack.sh: GPT 1.3B (24 layers, hidden 2048, 16 heads) in bf16 at sequence 16,384 on one
# GPU against sequence N × 16,384 with context parallelism CP=N over N GPUs (--cp-comm-type p2p,
# the ring, and a2a, the all-to-all), micro-batch 1; per-GPU tokens/s (by the logged time per iteration and by the log's time
# stamps), the ring's transfer time and the part of it the compute stream waited for (CUDA
# events, --metrics-file), the allocator's peak against --dry-run's estimate, and the ratio.
# Logs under $OUT (or /tmp/cp-speed).
#   tools/gpu/cp_speed.sh [--iters N] [--cp N]
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/devpack_env.bash
out=${OUT:-/tmp/cp-speed}
mkdir -p "$out"
iters=10; cp=2
while [ $# -gt 0 ]; do
  case $1 in
    --iters) iters=$2; shift 2 ;;
    --cp) cp=$2; shift 2 ;;
    *) echo "cp_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
base=(--device cuda --bf16 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --micro-batch-size 1
      --global-batch-size 1 --lr 3e-4 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data
      --tokenizer-type NullTokenizer --vocab-size 50304 --position-embedding-type rope --log-interval 2
      --log-throughput --data-cache-path "$out/cache")
run() {  # run NAME RANKS SEQ FLAGS...
  local name=$1 ranks=$2 seq=$3; shift 3
  local launch=(); [ "$ranks" -gt 1 ] && launch=(mpiexec.hydra -launcher fork -n "$ranks")
  local flags=("${base[@]}" --seq-length "$seq" --max-position-embeddings "$seq" "$@")
  mgt-train "${flags[@]}" --world-size "$ranks" --train-iters "$iters" --dry-run > "$out/$name-dry.log" 2>&1
  "${launch[@]}" mgt-train "${flags[@]}" --train-iters "$iters" --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 ||
    { echo "$name failed:"; tail -6 "$out/$name.log"; }
  python3 - "$out" "$name" "$ranks" "$seq" <<'PY'
import datetime, json, re, sys
out, name, ranks, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
try:
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if '"event": "train"' in l]
except OSError:
    rows = []
log = open(f"{out}/{name}.log").read()
dry = open(f"{out}/{name}-dry.log").read()
stamps = re.findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] iteration\s+(\d+)/", log)
wall = None
if len(stamps) >= 2:
    (t0, i0), (t1, i1) = stamps[0], stamps[-1]
    wall = (int(i1) - int(i0)) * seq / (datetime.datetime.fromisoformat(t1) - datetime.datetime.fromisoformat(t0)).total_seconds() / ranks
peak = re.findall(r"max allocated: ([0-9.]+)", log)
total = re.search(r'"total": (\d+)', dry)
step = re.search(r"estimated step: ([0-9.]+) s \(([0-9]+) tokens/s per GPU", dry)
last = rows[-1] if rows else {}
per_gpu = last.get("tokens_per_second", 0) / ranks
print(json.dumps({"name": name, "ranks": ranks, "seq": seq, "tokens_per_second_per_gpu": round(per_gpu),
                  "tflops_per_gpu": last.get("tflops_per_gpu"),
                  "wall_per_gpu": round(wall) if wall else None,
                  "cp_comm_ms": last.get("context_parallel_comm_ms"), "cp_exposed_ms": last.get("context_parallel_comm_exposed_ms"),
                  "ms_per_iteration": last.get("elapsed_ms_per_iteration"),
                  "max_allocated_mib": float(peak[-1]) if peak else None,
                  "dry_run_mib": round(int(total.group(1)) / 2**20) if total else None,
                  "dry_run_tokens_per_second_per_gpu": int(step.group(2)) if step else None}))
PY
}
run one16k 1 16384 | tee "$out/summary.jsonl"
long=$((cp * 16384)); tag=cp$cp-$((cp * 16))k
run "$tag" "$cp" "$long" --context-parallel-size "$cp" --cp-comm-type p2p | tee -a "$out/summary.jsonl"
run "$tag-a2a" "$cp" "$long" --context-parallel-size "$cp" --cp-comm-type a2a | tee -a "$out/summary.jsonl"
python3 - "$out/summary.jsonl" "$tag" <<'PY'
import json, sys
rows = {j["name"]: j for j in map(json.loads, open(sys.argv[1]))}
a = rows.get("one16k", {})
for name in (sys.argv[2], sys.argv[2] + "-a2a"):
    b = rows.get(name, {})
    if a.get("tokens_per_second_per_gpu") and b.get("tokens_per_second_per_gpu"):
        flops = (f", model TFLOP/s per GPU {b['tflops_per_gpu'] / a['tflops_per_gpu']:.3f} of one GPU's"
                 if a.get("tflops_per_gpu") and b.get("tflops_per_gpu") else "")
        print(f"{name}: per GPU / one GPU at 16k: {b['tokens_per_second_per_gpu'] / a['tokens_per_second_per_gpu']:.3f}{flops} "
              f"(target >= 0.90); context-parallel transfers {b['cp_comm_ms']} ms per iteration, exposed {b['cp_exposed_ms']} ms")
PY
