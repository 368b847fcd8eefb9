#!/usr/bin/env bash
# On a 2-GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# the NCCL tests of mgt-dist-tests (the all-to-all among them), then a small MoE model (8
# experts, top-2, alltoall dispatcher) on one GPU and with expert parallelism EP=2 over NCCL, in
# fp32 and bf16, with and without the distributed optimizer, with the allgather dispatcher, and
# under TP=2 with sequence parallelism (the experts split over the TP ranks); prints the largest
# relative differences of lm loss and grad norm against the one-GPU run. Then EP=2 with a shared
# expert, with and without --moe-shared-expert-overlap (the shared expert beside the all-to-all on
# NCCL's side stream), which must agree bit for bit, and the overlap's all-to-all time per
# iteration and the part of it exposed; and EP=2 with --moe-grouped-gemm with and without
# --delay-wgrad-compute (the experts' weight gradients beside the input gradients' return), also
# bit for bit. Top-1 routing with --moe-apply-probs-on-input, and routing by random logits
# (--moe-router-force-load-balancing), each at EP=2 against one GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/devpack_env.bash
out=${OUT:-/tmp/moe-ep}
mkdir -p "$out"
mpiexec.hydra -launcher fork -n 2 mgt-dist-tests "[nccl]" > "$out/nccl-tests.log" 2>&1
echo "mgt-dist-tests [nccl] on 2 GPUs: exit $?"; tail -3 "$out/nccl-tests.log"
model=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 256 --max-position-embeddings 256
       --micro-batch-size 4 --global-batch-size 16 --lr 3e-4 --train-iters 30 --log-interval 1 --eval-iters 0
       --hidden-dropout 0 --attention-dropout 0 --mock-data --tokenizer-type NullTokenizer --vocab-size 1023
       --position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights
       --disable-bias-linear --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3
       --moe-ffn-hidden-size 512 --moe-token-dispatcher-type alltoall --device cuda
       --data-cache-path "$out/cache" --deterministic-mode)
run() {  # run NAME RANKS FLAGS...
  local name=$1 ranks=$2; shift 2
  local launch=(); [ "$ranks" -gt 1 ] && launch=(mpiexec.hydra -launcher fork -n "$ranks")
  "${launch[@]}" mgt-train "${model[@]}" "$@" --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 ||
    { echo "$name failed:"; tail -5 "$out/$name.log"; }
}
run fp32-1 1
run fp32-ep2 2 --expert-model-parallel-size 2
run fp32-ep2-dist 2 --expert-model-parallel-size 2 --use-distributed-optimizer
run fp32-ep2-allgather 2 --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather
run fp32-tp2sp 2 --tensor-model-parallel-size 2 --sequence-parallel
run bf16-1 1 --bf16
run bf16-ep2 2 --bf16 --expert-model-parallel-size 2
run bf16-ep2-shared 2 --bf16 --expert-model-parallel-size 2 --moe-shared-expert-intermediate-size 512
run bf16-ep2-shared-overlap 2 --bf16 --expert-model-parallel-size 2 --moe-shared-expert-intermediate-size 512 \
  --moe-shared-expert-overlap
run bf16-ep2-grouped 2 --bf16 --expert-model-parallel-size 2 --moe-grouped-gemm
run bf16-ep2-grouped-delayed 2 --bf16 --expert-model-parallel-size 2 --moe-grouped-gemm --delay-wgrad-compute
# Top-1 with the probabilities on the experts' input (sigmoid scores), and routing by random logits
# (--moe-router-force-load-balancing, drawn from the seed, the micro-batch and the layer alike in
# every layout): EP=2 against one GPU.
top1=(--moe-router-topk 1 --moe-router-score-function sigmoid --moe-apply-probs-on-input)
run fp32-top1-1 1 "${top1[@]}"
run fp32-top1-ep2 2 "${top1[@]}" --expert-model-parallel-size 2
run fp32-forced-1 1 --moe-router-force-load-balancing
run fp32-forced-ep2 2 --moe-router-force-load-balancing --expert-model-parallel-size 2
grep -h "expert-model-parallel groups\|transport" "$out/fp32-ep2.log" | head -3
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    try:
        return {j["iteration"]: j for j in map(json.loads, open(f"{out}/{name}.jsonl")) if j["event"] == "train"}
    except OSError:
        return {}
for ref, runs in (("fp32-1", ("fp32-ep2", "fp32-ep2-dist", "fp32-ep2-allgather", "fp32-tp2sp")),
                  ("bf16-1", ("bf16-ep2",)), ("fp32-top1-1", ("fp32-top1-ep2",)),
                  ("fp32-forced-1", ("fp32-forced-ep2",))):
    a = load(ref)
    for name in runs:
        b = load(name)
        keys = sorted(set(a) & set(b))
        if not keys:
            print(f"{name}: no iterations to compare"); continue
        worst = {f: max(abs(a[k][f] - b[k][f]) / abs(a[k][f]) for k in keys) for f in ("lm_loss", "grad_norm")}
        print(f"{name} vs {ref}: {len(keys)} iterations, last lm loss {a[keys[-1]]['lm_loss']:.6f} / "
              f"{b[keys[-1]]['lm_loss']:.6f}, largest relative differences "
              + ", ".join(f"{f} {v:.2e}" for f, v in worst.items()))
for ref, name in (("bf16-ep2-shared", "bf16-ep2-shared-overlap"), ("bf16-ep2-grouped", "bf16-ep2-grouped-delayed")):
    a, b = load(ref), load(name)
    keys = sorted(set(a) & set(b))
    same = bool(keys) and all(a[k][f] == b[k][f] for k in keys for f in ("lm_loss", "grad_norm", "load_balancing_loss"))
    last = b[keys[-1]] if keys else {}
    print(f"{name} vs {ref}: {len(keys)} iterations, "
          f"{'bit for bit' if same else 'DIFFERENT'}; all-to-all {last.get('expert_parallel_comm_ms', 'n/a')} ms per "
          f"iteration, exposed {last.get('expert_parallel_comm_exposed_ms', 'n/a')} ms")
PY
