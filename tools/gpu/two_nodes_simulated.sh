#!/usr/bin/env bash
# On a machine of 4 GPUs, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# the 4 GPUs as 2 nodes of 2 (mgt-train --simulated-nodes 2), against the same 4 GPUs as one node.
# Between the simulated nodes NCCL runs as it would between machines: each node's ranks get a
# host identity of their own (NCCL_HOSTID, through hydra's per-executable -env), so NCCL sees two
# hosts and connects them with its network transport only (no P2P/NVLink, no shared memory across
# them), forced onto sockets over the loopback interface (NCCL_NET=Socket, NCCL_IB_DISABLE=1,
# NCCL_SOCKET_IFNAME=lo); inside a node NCCL keeps NVLink and mgt's copy-engine collectives run
# (they map the peers' memory only within a node: dist/node_membership.hpp).
# Layouts, a GPT-2 124M shape in bf16 on mock data, 30 iterations:
#   dp4      DP=4: the data-parallel group spans both nodes (NCCL over sockets throughout);
#   tp2-dp2  TP=2 with sequence parallelism inside each node (copy engines), DP=2 across them;
# each on one GPU's reference. Prints, per layout: the largest relative lm-loss difference of the
# two-node run against the one-node run; the transports NCCL reports (connections via NET/Socket
# and via P2P); and tokens/s per GPU (median of the last 10 iterations) with the data-parallel
# scaling efficiency against one GPU, over sockets beside NVLink's. Logs under $OUT (or
# /tmp/two-nodes).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/devpack_env.bash
out=${OUT:-/tmp/two-nodes}
mkdir -p "$out"
gpus=$(nvidia-smi -L | grep -c '^GPU ')
if [ "$gpus" -lt 4 ]; then
  echo "two_nodes_simulated.sh: needs 4 GPUs, found $gpus" >&2
  exit 1
fi
export CUDA_VISIBLE_DEVICES=0,1,2,3
model=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --max-position-embeddings 1024
       --micro-batch-size 4 --lr 3e-4 --train-iters 30 --log-interval 1 --eval-iters 0 --hidden-dropout 0
       --attention-dropout 0 --mock-data --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json
       --merge-file datasets/gpt2-merges.txt --bf16 --device cuda --log-throughput --seed 1234
       --data-cache-path "$out/cache")
# NCCL's network transport on sockets, and what it connected through (INIT, NET lines).
sockets=(-env NCCL_NET Socket -env NCCL_IB_DISABLE 1 -env NCCL_SOCKET_IFNAME lo -env NCCL_DEBUG INFO
         -env NCCL_DEBUG_SUBSYS INIT,NET)
run() {  # run NAME single|one|two FLAGS...: 1 GPU, the 4 GPUs as one node, or as two simulated nodes
  local name=$1 how=$2
  shift 2
  local args=("${model[@]}" "$@" --metrics-file "$out/$name.jsonl")
  case $how in
    single) mgt-train "${args[@]}" ;;
    one) mpiexec.hydra -launcher fork -n 4 -env NCCL_DEBUG INFO -env NCCL_DEBUG_SUBSYS INIT,NET mgt-train "${args[@]}" ;;
    # Hydra's MPMD form: ranks 0-1 and 2-3, each pair with its own NCCL host identity.
    two) mpiexec.hydra -launcher fork \
           -n 2 -env NCCL_HOSTID mgt-simulated-node-0 "${sockets[@]}" mgt-train "${args[@]}" --simulated-nodes 2 : \
           -n 2 -env NCCL_HOSTID mgt-simulated-node-1 "${sockets[@]}" mgt-train "${args[@]}" --simulated-nodes 2 ;;
  esac > "$out/$name.log" 2>&1 || { echo "$name failed:"; tail -5 "$out/$name.log"; }
}
run one-gpu single --global-batch-size 16
for layout in dp4 tp2-dp2; do
  flags=(--global-batch-size 16)
  [ $layout = tp2-dp2 ] && flags+=(--tensor-model-parallel-size 2 --sequence-parallel)
  run "$layout-one-node" one "${flags[@]}"
  run "$layout-two-nodes" two "${flags[@]}"
  for where in one-node two-nodes; do
    log=$out/$layout-$where.log
    echo "$layout, $where: $(grep -m1 -o '> nodes: .*' "$log")"
    echo "  $(grep -m1 -o 'communication: .*' "$log")"
    echo "  NCCL connections: $(grep -c 'via NET/Socket' "$log") via NET/Socket, $(grep -c 'via P2P' "$log") via P2P;" \
      "$(grep -m1 -o 'data-parallel groups: .*' "$log")"
  done
  echo "$layout: two simulated nodes against one node: $(python3 tools/gpu/compare_losses.py \
    "$out/$layout-one-node.jsonl" "$out/$layout-two-nodes.jsonl")"
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def records(name):
    try:
        return {j["iteration"]: j for j in map(json.loads, open(f"{out}/{name}.jsonl")) if j["event"] == "train"}
    except OSError:
        return {}
def per_gpu(name, gpus):
    r = records(name)
    rates = [r[i]["tokens_per_second"] for i in sorted(r)[-10:] if "tokens_per_second" in r[i]]
    return statistics.median(rates) / gpus if rates else None
one = per_gpu("one-gpu", 1)
print(f"1 GPU: {one:.0f} tokens/s" if one else "1 GPU: no throughput (see one-gpu.log)")
for layout in ("dp4", "tp2-dp2"):
    figures = []
    for where, label in (("one-node", "NVLink (one node)"), ("two-nodes", "sockets (two simulated nodes)")):
        rate = per_gpu(f"{layout}-{where}", 4)
        if rate is None:
            figures.append(f"{label}: no throughput")
        else:
            eff = f", scaling efficiency {rate / one:.1%}" if one else ""
            figures.append(f"{label}: {rate:.0f} tokens/s per GPU{eff}")
    print(f"{layout}: " + "; ".join(figures))
PY
