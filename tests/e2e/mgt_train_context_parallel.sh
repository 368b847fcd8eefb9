#!/usr/bin/env bash
# End-to-end checks of mgt-train with context parallelism (mpiexec, CPU backend): each sequence
# cut into 2 x CP chunks (Megatron's load-balanced split) and attended over the ring reproduces
# the one-rank run's losses (train and validation, 20 iterations, within 1e-5 relative) for a
# GPT-2-style model (learned positions) and a Llama-style one (rotary, grouped-query attention):
# CP=2 (GPT-2), CP=4 and CP=2 x TP=2 with sequence parallelism (Llama), CP=2 x DP=2 with the distributed optimizer
# (sharded over the data-parallel group with context parallelism) and CP=2 x PP=2 (GPT-2). A CP=2
# checkpoint resumes at CP=1 and at CP=4, continuing the one-rank curve; --dry-run counts each
# rank's part of the sequence. The groups are Megatron's. --cp-comm-type a2a (heads traded for
# sequence by all-to-alls) reproduces the one-rank run too at CP=2 (both models) and CP=4
# (GPT-2); allgather, a2a+p2p, a type per layer, a2a with heads or groups that CP does not
# divide, and sequence lengths that 2 x CP does not divide are refused.
# An MoE model (aux_loss and seq_aux_loss, CP=2) counts its load-balancing loss's tokens per
# expert over the context-parallel ranks as Megatron-Core does: the logged load_balancing_loss
# and z_loss are those of the whole sequences, and the auxiliary losses act on the gradients with
# their coefficients divided by CP (Megatron's scaling, model/moe_router.cpp), so the lm loss,
# both logged losses and the grad norm are those of the one-rank run with the coefficients
# halved, within 1e-5 relative (1e-4 for the norm).
# Usage: bash tests/e2e/mgt_train_context_parallel.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# Dropout masks under context parallelism are not the one-rank run's (model/ring_attention.hpp):
# the comparisons train without dropout.
GPT2_NODROP=("${GPT2[@]}" --hidden-dropout 0 --attention-dropout 0)

# Usage errors, before any rank trains.
expect_status 2 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 2 --cp-comm-type allgather
grep -q "^mgt-train: --cp-comm-type allgather is not implemented (p2p, the ring, and a2a, all-to-all)$" \
  "$WORK/err.txt" || fail "allgather not refused by name"
expect_status 2 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 2 --cp-comm-type p2p a2a
grep -q "^mgt-train: --cp-comm-type: one type per layer is not implemented" "$WORK/err.txt" ||
  fail "a type per layer not refused"
expect_status 2 ranks 4 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 4 --cp-comm-type a2a
grep -q "^mgt-train: --cp-comm-type a2a: the attention heads (4) and query groups (2) of each tensor-parallel rank must be multiples of the context-parallel size (4)$" \
  "$WORK/err.txt" || fail "a2a with groups CP does not divide not refused"
expect_status 2 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 2 --seq-length 62 \
  --max-position-embeddings 64
grep -q "^mgt-train: --seq-length (62) must be divisible by 2 x --context-parallel-size (4)" "$WORK/err.txt" ||
  fail "a sequence length 2 x CP does not divide not refused"

# --dry-run: the training activations of seq / CP tokens per rank (and the ring's buffers).
for cp in 1 2; do
  ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size $cp --dry-run >"$WORK/dry-$cp.json" 2>/dev/null ||
    fail "--dry-run at CP=$cp failed"
done
python3 - "$WORK/dry-1.json" "$WORK/dry-2.json" <<'PY' || fail "--dry-run does not account for context parallelism"
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:])
assert one["layout"]["context_parallel_size"] == 1 and two["layout"]["context_parallel_size"] == 2, two["layout"]
assert two["layout"]["data_parallel_size"] == 1, two["layout"]
assert two["memory_per_rank_bytes"]["activations"] < one["memory_per_rank_bytes"]["activations"], (one, two)
PY

keep_iteration() {
  local name
  name=$(printf 'iter_%07d' "$3")
  mkdir "$2"
  cp -r "$1/$name" "$2/"
  echo "$3" >"$2/latest_checkpointed_iteration.txt"
}

expect_status 0 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --metrics-file "$WORK/gpt2-1.jsonl"
expect_status 0 "$BIN/mgt-train" "${LLAMA[@]}" --metrics-file "$WORK/llama-1.jsonl"

# CP=2, saving at 10 and 20 (GPT-2-style).
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --context-parallel-size 2 --cp-comm-type p2p \
  --save "$WORK/ckpt-cp2" --save-interval 10 --metrics-file "$WORK/gpt2-cp2.jsonl"
grep -q '^using world size: 2, data-parallel size: 1, context-parallel size: 2, tensor-model-parallel size: 1, pipeline-model-parallel size: 1$' \
  "$WORK/out.txt" || fail "CP=2: no layout line"
grep -q '^> context-parallel groups: \[0, 1\] (mpi), ring attention (--cp-comm-type p2p), 32 tokens per rank$' \
  "$WORK/out.txt" || fail "CP=2: context-parallel groups"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-cp2.jsonl" same
[[ "$(ls "$WORK/ckpt-cp2/iter_0000010" | tr '\n' ' ')" == "mp_rank_00.h5 " ]] ||
  fail "CP=2: the checkpoint is not one model file"

# CP=4: chunks of 8 tokens.
expect_status 0 ranks 4 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 4 --metrics-file "$WORK/llama-cp4.jsonl"
compare_curves "$WORK/llama-1.jsonl" "$WORK/llama-cp4.jsonl" same

# CP=2 x TP=2 with sequence parallelism: tensor-parallel ranks adjacent, then context-parallel.
expect_status 0 ranks 4 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 2 --tensor-model-parallel-size 2 \
  --sequence-parallel --metrics-file "$WORK/llama-cp2-tp2.jsonl"
grep -q '^> context-parallel groups: \[0, 2\] \[1, 3\] (mpi)' "$WORK/out.txt" || fail "CP=2 x TP=2: groups"
compare_curves "$WORK/llama-1.jsonl" "$WORK/llama-cp2-tp2.jsonl" same

# CP=2 x DP=2, the distributed optimizer sharded over all four ranks.
expect_status 0 ranks 4 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --context-parallel-size 2 --use-distributed-optimizer \
  --metrics-file "$WORK/gpt2-cp2-dp2.jsonl"
grep -q '^> data-parallel groups with context parallelism (gradients): \[0, 1, 2, 3\] (mpi)$' "$WORK/out.txt" ||
  fail "CP=2 x DP=2: gradient group"
grep -q '^> data-parallel groups: \[0, 2\] \[1, 3\] (mpi)$' "$WORK/out.txt" || fail "CP=2 x DP=2: data-parallel groups"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-cp2-dp2.jsonl" same

# CP=2 x PP=2.
expect_status 0 ranks 4 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --context-parallel-size 2 \
  --pipeline-model-parallel-size 2 --metrics-file "$WORK/gpt2-cp2-pp2.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-cp2-pp2.jsonl" same

# --cp-comm-type a2a: CP=2 for both models (grouped-query attention and rotary in the Llama one),
# CP=4 for GPT-2's four heads.
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --context-parallel-size 2 --cp-comm-type a2a \
  --metrics-file "$WORK/gpt2-cp2-a2a.jsonl"
grep -q '^> context-parallel groups: \[0, 1\] (mpi), all-to-all attention (--cp-comm-type a2a), 32 tokens per rank$' \
  "$WORK/out.txt" || fail "CP=2 a2a: context-parallel groups"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-cp2-a2a.jsonl" same
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --context-parallel-size 2 --cp-comm-type a2a \
  --metrics-file "$WORK/llama-cp2-a2a.jsonl"
compare_curves "$WORK/llama-1.jsonl" "$WORK/llama-cp2-a2a.jsonl" same
expect_status 0 ranks 4 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --context-parallel-size 4 --cp-comm-type a2a \
  --metrics-file "$WORK/gpt2-cp4-a2a.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-cp4-a2a.jsonl" same

# The CP=2 checkpoint resumed at CP=1 and at CP=4 continues the one-rank curve.
keep_iteration "$WORK/ckpt-cp2" "$WORK/from-cp2-to-1" 10
keep_iteration "$WORK/ckpt-cp2" "$WORK/from-cp2-to-4" 10
expect_status 0 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --load "$WORK/from-cp2-to-1" --metrics-file "$WORK/cp2-1.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/cp2-1.jsonl" continues
expect_status 0 ranks 4 "$BIN/mgt-train" "${GPT2_NODROP[@]}" --context-parallel-size 4 --load "$WORK/from-cp2-to-4" \
  --metrics-file "$WORK/cp2-4.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/cp2-4.jsonl" continues

# MoE: the load-balancing loss's tokens per expert summed over the context-parallel group and
# normalised by its tokens (Megatron's sequence_partition_group), the auxiliary losses' gradients
# those of the one-rank run with the coefficients halved at CP=2.
source "$SRC/tests/e2e/lib/moe_equivalence.bash"
HALVED=(--moe-aux-loss-coeff 5e-3 --moe-z-loss-coeff 5e-4)
SEQ_AUX=(--moe-router-load-balancing-type seq_aux_loss)
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${HALVED[@]}" --metrics-file "$WORK/moe-halved.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --context-parallel-size 2 --metrics-file "$WORK/moe-cp2.jsonl"
compare "$WORK/moe-halved.jsonl" "$WORK/moe-cp2.jsonl" || fail "MoE at CP=2 does not reproduce the one-rank run"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${SEQ_AUX[@]}" "${HALVED[@]}" --metrics-file "$WORK/moe-seq-halved.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${SEQ_AUX[@]}" --context-parallel-size 2 \
  --metrics-file "$WORK/moe-seq-cp2.jsonl"
compare "$WORK/moe-seq-halved.jsonl" "$WORK/moe-seq-cp2.jsonl" ||
  fail "MoE (seq_aux_loss) at CP=2 does not reproduce the one-rank run"

echo "mgt-train context parallelism: all checks passed"
