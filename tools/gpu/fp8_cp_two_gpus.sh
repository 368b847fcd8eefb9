#!/usr/bin/env bash
# On a 2-GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# FP8 (hybrid, delayed) on one GPU and with DP=2 and TP=2 over NCCL (amaxes max-reduced across
# the GPUs), and context parallelism CP=2 over NCCL against one GPU, on a small GPT; prints each
# run's losses and the largest relative differences.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/devpack_env.bash
out=${OUT:-/tmp/two-gpus}
mkdir -p "$out"
model=(--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024
       --micro-batch-size 4 --global-batch-size 8 --lr 3e-4 --train-iters 30 --log-interval 1 --eval-iters 0
       --hidden-dropout 0 --attention-dropout 0 --mock-data --tokenizer-type GPT2BPETokenizer
       --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt --bf16 --device cuda
       --data-cache-path /tmp/two-gpus-cache --deterministic-mode)
fp8=(--fp8-format hybrid --fp8-amax-history-len 16 --fp8-amax-compute-algo max)
run() {  # run NAME RANKS FLAGS...
  local name=$1 ranks=$2; shift 2
  local launch=(); [ "$ranks" -gt 1 ] && launch=(mpiexec.hydra -launcher fork -n "$ranks")
  "${launch[@]}" mgt-train "${model[@]}" "$@" --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 ||
    { echo "$name failed:"; tail -5 "$out/$name.log"; }
}
run fp8-1 1 "${fp8[@]}"
run fp8-dp2 2 "${fp8[@]}"
run fp8-tp2 2 "${fp8[@]}" --tensor-model-parallel-size 2 --sequence-parallel
run bf16-1 1
run cp2 2 --context-parallel-size 2
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def losses(name):
    try:
        return {j["iteration"]: j["lm_loss"] for j in map(json.loads, open(f"{out}/{name}.jsonl")) if j["event"] == "train"}
    except OSError:
        return {}
for run, ref in (("fp8-dp2", "fp8-1"), ("fp8-tp2", "fp8-1"), ("fp8-1", "bf16-1"), ("cp2", "bf16-1")):
    a, b = losses(ref), losses(run)
    common = [i for i in a if i in b]
    if not common:
        print(f"{run} vs {ref}: no common iterations"); continue
    rel = max(abs(a[i] - b[i]) / a[i] for i in common)
    print(f"{run} vs {ref}: {len(common)} iterations, loss {a[max(common)]:.4f} / {b[max(common)]:.4f}, max rel diff {rel:.2e}")
PY
