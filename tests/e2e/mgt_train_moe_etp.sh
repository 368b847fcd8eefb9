#!/usr/bin/env bash
# End-to-end checks of --expert-tensor-parallel-size 1 with tensor and expert parallelism (CPU
# ranks over MPI): TP=2 with --sequence-parallel and EP=2 lay the expert-parallel groups across
# the tensor-parallel ranks as Megatron's expert grid does (expert-tensor 1, then EP, then
# expert-data), and reproduce the one-rank run's lm loss, auxiliary losses, grad norm and params
# norm (20 iterations, within 1e-5 relative; 1e-4 for the norms): on 2 ranks with the alltoall and
# the allgather dispatcher, on 4 ranks with the distributed optimizer sharding the experts over
# their expert-data-parallel group. There --overlap-grad-reduce with --overlap-param-gather (the
# experts' weights gathered over their own group) continues a checkpoint with the same losses and
# norms, bit for bit, as the run without them. A checkpoint saved at TP=2 x EP=2 x ETP=1 resumes on
# one rank, directly and through mgt-ckpt-convert, and the one-rank run's checkpoint resumes in
# that layout with two pipeline stages (PP=2), optimizer state included, with the uninterrupted
# run's losses. Other expert tensor-parallel sizes split the experts over expert-tensor-parallel
# groups of Megatron's expert grid and reproduce the one-rank run too: TP=1 x ETP=2 on 2 ranks,
# and ETP=2 x EP=2 on 4 ranks with the distributed optimizer. Checkpoints move between expert
# tensor-parallel sizes: the ETP=1 checkpoint resumes at ETP=2 x EP=2 (with the allgather
# dispatcher), the ETP=2 one on one rank, and converted to TP=2 at TP=2 x ETP=4 (sequence
# parallel). A world the expert grid cannot tile is refused with one line.
# Usage: bash tests/e2e/mgt_train_moe_etp.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"
source "$SRC/tests/e2e/lib/moe_equivalence.bash"

MOE+=(--log-params-norm)
ETP1=(--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2
      --expert-tensor-parallel-size 1)

# identical A B FIRST: the losses and norms of B equal A's exactly from iteration FIRST on.
identical() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
a, b = load(sys.argv[1]), load(sys.argv[2])
first = int(sys.argv[3])
keys = sorted(k for k in a if k >= first)
assert sorted(k for k in b if k >= first) == keys and keys, (sorted(b), keys)
for k in keys:
    for field in ("lm_loss", "load_balancing_loss", "z_loss", "grad_norm", "params_norm"):
        assert a[k][field] == b[k][field], f"{k} {field}: {a[k][field]!r} vs {b[k][field]!r}"
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len(keys)} iterations identical")
PY
}

expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/one.jsonl" --save "$WORK/ck-one" --save-interval 10

# 2 ranks: the expert-parallel pair is the tensor-parallel pair, each rank running its half of
# the sequence through its 4 experts and the other rank's.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${ETP1[@]}" --metrics-file "$WORK/etp1.jsonl"
grep -q "> expert-model-parallel groups: \[0, 1\] (mpi), 4 of the 8 experts per rank, tokens by all-to-all" \
  "$WORK/out.txt" || fail "no expert-model-parallel groups line"
compare "$WORK/one.jsonl" "$WORK/etp1.jsonl"
# Megatron's MoEAllGatherTokenDispatcher over the same group.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${ETP1[@]}" --moe-token-dispatcher-type allgather \
  --metrics-file "$WORK/etp1-allgather.jsonl"
compare "$WORK/one.jsonl" "$WORK/etp1-allgather.jsonl"

# 4 ranks, two replicas: the experts' gradients are reduced (and their optimizer state sharded)
# over the ranks of the same tensor-parallel rank of the two replicas.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${ETP1[@]}" --use-distributed-optimizer \
  --metrics-file "$WORK/etp1-dist.jsonl" --save "$WORK/ck-etp1" --save-interval 10
grep -q "> tensor-model-parallel groups: \[0, 1\] \[2, 3\]" "$WORK/out.txt" || fail "no tensor-model-parallel groups line"
grep -q "> expert-model-parallel groups: \[0, 1\] \[2, 3\] (mpi)" "$WORK/out.txt" ||
  fail "no expert-model-parallel groups line on 4 ranks"
grep -q "> expert-data-parallel groups (the experts' gradients): \[0, 2\] \[1, 3\]" "$WORK/out.txt" ||
  fail "no expert-data-parallel groups line"
compare "$WORK/one.jsonl" "$WORK/etp1-dist.jsonl"
for ck in "$WORK/ck-one" "$WORK/ck-etp1"; do
  rm -r "$ck/iter_0000020"
  echo 10 >"$ck/latest_checkpointed_iteration.txt"
done
# The same from iteration 10 with the overlapped reduce-scatter and all-gather.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${ETP1[@]}" --use-distributed-optimizer \
  --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 20000 --load "$WORK/ck-etp1" \
  --metrics-file "$WORK/etp1-overlap.jsonl"
grep -q "and the weights' all-gather with the forward" "$WORK/out.txt" || fail "no overlap line"
identical "$WORK/etp1-dist.jsonl" "$WORK/etp1-overlap.jsonl" 11
# The one-rank run's checkpoint in this layout with two pipeline stages (TP=2 x PP=2 x EP=2): the
# first stage holds no MoE layer, the second the experts; the experts' norm group spans both.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${ETP1[@]}" --pipeline-model-parallel-size 2 \
  --use-distributed-optimizer --load "$WORK/ck-one" --metrics-file "$WORK/resumed-etp1-pp2.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-etp1-pp2.jsonl" 11

# Each tensor-parallel rank of the first replica stores its own experts whole, under their
# global numbers: experts 0-3 in mp_rank_00.h5, 4-7 in mp_rank_01.h5. The checkpoint resumes on
# one rank, directly and converted.
CK10="$WORK/ck-etp1/iter_0000010"
grep -aq "local_experts.3.linear_fc1.weight" "$CK10/mp_rank_00.h5" || fail "experts 0-3 not in mp_rank_00.h5"
grep -aq "local_experts.7.linear_fc1.weight" "$CK10/mp_rank_01.h5" || fail "experts 4-7 not in mp_rank_01.h5"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-etp1" --metrics-file "$WORK/resumed-one.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-one.jsonl" 11
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/ck-etp1" \
  --save-dir "$WORK/ck-converted" --target-tensor-parallel-size 1
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-converted" --metrics-file "$WORK/converted-one.jsonl"
compare "$WORK/one.jsonl" "$WORK/converted-one.jsonl" 11

# Megatron's expert grid with an expert-tensor size of its own: TP=1 x ETP=2 on 2 ranks, each
# rank's tokens to both halves of every expert.
ETP2=(--expert-tensor-parallel-size 2)
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${ETP2[@]}" --metrics-file "$WORK/etp2.jsonl"
grep -q "> expert-tensor-parallel groups (each expert's weights split 2 ways): \[0, 1\], expert-tensor-and-model-parallel groups (the tokens to the experts): \[0, 1\] (mpi)" \
  "$WORK/out.txt" || fail "no expert-tensor-parallel groups line"
compare "$WORK/one.jsonl" "$WORK/etp2.jsonl"
# ETP=2 x EP=2 on 4 ranks, the experts' optimizer state sharded over their (one-rank)
# expert-data-parallel groups, the dense layers' over DP=4.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${ETP2[@]}" --expert-model-parallel-size 2 \
  --use-distributed-optimizer --metrics-file "$WORK/etp2-ep2.jsonl" --save "$WORK/ck-etp2" --save-interval 10
grep -q "> expert-model-parallel groups: \[0, 2\] \[1, 3\] (mpi), 4 of the 8 experts per rank" "$WORK/out.txt" ||
  fail "no expert-model-parallel groups line at ETP=2"
compare "$WORK/one.jsonl" "$WORK/etp2-ep2.jsonl"
# The ETP=1 checkpoint (TP=2 x EP=2) resumes at ETP=2 x EP=2 with the allgather dispatcher (the
# tokens gathered over the expert tensor-and-model group); the ETP=2 one on one rank, and
# converted to TP=2 at TP=2 x ETP=4.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${ETP2[@]}" --expert-model-parallel-size 2 \
  --moe-token-dispatcher-type allgather --use-distributed-optimizer --load "$WORK/ck-etp1" \
  --metrics-file "$WORK/resumed-etp2.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-etp2.jsonl" 11
rm -r "$WORK/ck-etp2/iter_0000020"
echo 10 >"$WORK/ck-etp2/latest_checkpointed_iteration.txt"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-etp2" --metrics-file "$WORK/resumed-etp2-one.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-etp2-one.jsonl" 11
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/ck-etp2" \
  --save-dir "$WORK/ck-etp2-tp2" --target-tensor-parallel-size 2
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-tensor-parallel-size 4 --load "$WORK/ck-etp2-tp2" --metrics-file "$WORK/resumed-tp2-etp4.jsonl"
grep -q "> expert-tensor-parallel groups (each expert's weights split 4 ways): \[0, 1, 2, 3\]" "$WORK/out.txt" ||
  fail "no expert-tensor-parallel groups line at TP=2 x ETP=4"
compare "$WORK/one.jsonl" "$WORK/resumed-tp2-etp4.jsonl" 11

# The expert grid (expert-tensor 1 x EP 4 x PP 1) does not tile 2 ranks.
expect_status 2 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-model-parallel-size 4 --expert-tensor-parallel-size 1
one_line "world size (2) is not divisible by --expert-tensor-parallel-size (1) x --expert-model-parallel-size (4) x --pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (4)"
# Nor does expert-tensor 4 x EP 1 x PP 1.
expect_status 2 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --expert-tensor-parallel-size 4
one_line "world size (2) is not divisible by --expert-tensor-parallel-size (4) x --expert-model-parallel-size (1) x --pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (4)"
echo "ok"
