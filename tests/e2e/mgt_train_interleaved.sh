#!/usr/bin/env bash
# End-to-end checks of mgt-train with Megatron's interleaved 1F1B schedule (mpiexec, CPU backend):
# PP=2 with 2 model chunks per rank reproduces the one-rank run's losses (train and validation,
# every iteration, within 1e-5 relative) for a GPT-2-style model (tied embeddings across the first
# and last virtual stages) and a Llama-style one; PP=4 with 2 chunks does too (the default
# micro-batch groups and groups of all 8 micro-batches), and PP=2 x DP=2 with the distributed
# optimizer and overlapped gradient reduction and weight gathering; a checkpoint saved interleaved
# continues without interleaving, and one saved without interleaving continues interleaved;
# Megatron's checks of the flags are usage errors.
# Usage: bash tests/e2e/mgt_train_interleaved.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# Four layers, one per chunk at PP=2; micro-batches of 2, so an iteration has 4 micro-batches
# (warm-up, steady phase and cool-down on both ranks).
IL_GPT2=("${GPT2[@]}" --num-layers 4 --micro-batch-size 2)
IL_LLAMA=("${LLAMA[@]}" --num-layers 4 --micro-batch-size 2)

expect_status 0 "$BIN/mgt-train" "${IL_GPT2[@]}" --metrics-file "$WORK/gpt2-1.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --metrics-file "$WORK/gpt2-il.jsonl"
grep -q '^> pipeline-model-parallel groups: \[0, 1\] (mpi), layers per stage 2, 2, interleaved 1F1B schedule, 2 model chunks per stage, micro-batch groups of 2$' \
  "$WORK/out.txt" || fail "PP=2 interleaved: no pipeline group line"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-il.jsonl" same

expect_status 0 "$BIN/mgt-train" "${IL_LLAMA[@]}" --metrics-file "$WORK/llama-1.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${IL_LLAMA[@]}" --pipeline-model-parallel-size 2 \
  --num-virtual-stages-per-pipeline-rank 2 --metrics-file "$WORK/llama-il.jsonl"
compare_curves "$WORK/llama-1.jsonl" "$WORK/llama-il.jsonl" same

# PP=2 x DP=2 with the distributed optimizer: 2 micro-batches per rank, one group. The gradients
# reduced and the weights gathered bucket by bucket (small buckets: several per stage), the
# reductions started during the last backward, which is chunk 0's: the later chunks' gradients,
# after chunk 0's in the buffer, are complete by then.
expect_status 0 ranks 4 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-virtual-stages-per-pipeline-rank 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
  --ddp-bucket-size 20000 --metrics-file "$WORK/gpt2-il-dp2.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-il-dp2.jsonl" same

# PP=4 with 2 chunks: eight layers, eight micro-batches of 1.
PP4_GPT2=("${GPT2[@]}" --num-layers 8 --micro-batch-size 1)
PP4_LLAMA=("${LLAMA[@]}" --num-layers 8 --micro-batch-size 1)
expect_status 0 "$BIN/mgt-train" "${PP4_GPT2[@]}" --metrics-file "$WORK/gpt2-8-1.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${PP4_GPT2[@]}" --pipeline-model-parallel-size 4 \
  --num-virtual-stages-per-pipeline-rank 2 --metrics-file "$WORK/gpt2-pp4-il.jsonl"
compare_curves "$WORK/gpt2-8-1.jsonl" "$WORK/gpt2-pp4-il.jsonl" same
expect_status 0 "$BIN/mgt-train" "${PP4_LLAMA[@]}" --metrics-file "$WORK/llama-8-1.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${PP4_LLAMA[@]}" --pipeline-model-parallel-size 4 \
  --num-layers-per-virtual-pipeline-stage 1 --microbatch-group-size-per-virtual-pipeline-stage 8 \
  --metrics-file "$WORK/llama-pp4-il.jsonl"
grep -q 'layers per stage 2, 2, 2, 2, interleaved 1F1B schedule, 2 model chunks per stage, micro-batch groups of 8$' \
  "$WORK/out.txt" || fail "PP=4 interleaved: no pipeline group line"
compare_curves "$WORK/llama-8-1.jsonl" "$WORK/llama-pp4-il.jsonl" same

# Checkpoints keep the global layer numbers: saved interleaved at 10, each stage's file says which
# layers it held; resumed without interleaving, the one-rank curve continues.
CK="$WORK/ckpt-il"
expect_status 0 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --save "$CK" --save-interval 10 --exit-interval 10
grep -aq '"virtual_stages": 2, "layers": \[1, 3\]' "$CK/iter_0000010/mp_rank_00_001.h5" || fail "interleaved: stage 2 layers"
expect_status 0 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 --load "$CK" \
  --metrics-file "$WORK/il-to-pp2.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/il-to-pp2.jsonl" continues
# Saved at PP=2 without interleaving, resumed interleaved (the Llama-style model: untied).
expect_status 0 ranks 2 "$BIN/mgt-train" "${IL_LLAMA[@]}" --pipeline-model-parallel-size 2 --save "$WORK/ckpt-pp2" \
  --save-interval 10 --exit-interval 10
expect_status 0 ranks 2 "$BIN/mgt-train" "${IL_LLAMA[@]}" --pipeline-model-parallel-size 2 \
  --num-virtual-stages-per-pipeline-rank 2 --load "$WORK/ckpt-pp2" --metrics-file "$WORK/pp2-to-il.jsonl"
compare_curves "$WORK/llama-1.jsonl" "$WORK/pp2-to-il.jsonl" continues

# Usage errors, as Megatron's arguments.py and schedules.py check them.
expect_status 2 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --num-virtual-stages-per-pipeline-rank 2
grep -q "No more than one of --num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank" \
  "$WORK/err.txt" || fail "both flags accepted: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 3
grep -q "the layers per pipeline stage (2) must be divisible by --num-layers-per-virtual-pipeline-stage (3)" \
  "$WORK/err.txt" || fail "layer split not checked: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-virtual-stages-per-pipeline-rank 3
grep -q "must be divisible by --pipeline-model-parallel-size (2) times the virtual stages per pipeline rank (3)" \
  "$WORK/err.txt" || fail "chunks not checked: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-virtual-stages-per-pipeline-rank 2 --microbatch-group-size-per-virtual-pipeline-stage 3
grep -q "modulo --microbatch-group-size-per-virtual-pipeline-stage (3) is 1" "$WORK/err.txt" ||
  fail "last group not checked: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --num-virtual-stages-per-pipeline-rank 2 --microbatch-group-size-per-virtual-pipeline-stage 8
grep -q "must lie between --pipeline-model-parallel-size (2) and the number of micro-batches per iteration (4)" \
  "$WORK/err.txt" || fail "group size not checked: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --num-virtual-stages-per-pipeline-rank 2
grep -q "should be greater than 1" "$WORK/err.txt" || fail "interleaving without a pipeline: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${IL_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --microbatch-group-size-per-virtual-pipeline-stage 2
grep -q "needs the interleaved schedule" "$WORK/err.txt" || fail "group size without interleaving: $(cat "$WORK/err.txt")"
echo "mgt-train interleaved schedule: all checks passed"
