#!/usr/bin/env bash
# End-to-end checks of mgt-train with tensor and pipeline parallelism together on 4 ranks
# (mpiexec, CPU backend): TP=2 x PP=2 reproduces the one-rank run's losses (train and
# validation, every iteration, within 1e-5 relative) for a GPT-2-style model (tied embeddings,
# the embedding group [0, 2] [1, 3]) and a Llama-style one with sequence parallelism and the
# distributed optimizer; its checkpoint (one file per tensor-parallel rank and stage, each rank's
# own shards) continues the one-rank curve on one rank.
# Usage: bash tests/e2e/mgt_train_pipeline_tensor_parallel.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# As in mgt_train_pipeline_parallel.sh: four layers, four micro-batches of 2 per iteration.
PIPE_GPT2=("${GPT2[@]}" --num-layers 4 --micro-batch-size 2)
PIPE_LLAMA=("${LLAMA[@]}" --num-layers 4 --micro-batch-size 2)

expect_status 0 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --metrics-file "$WORK/gpt2-1.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --save "$WORK/ckpt" --save-interval 10 --metrics-file "$WORK/gpt2-tp2-pp2.jsonl"
[[ "$(grep -c '] iteration ' "$WORK/out.txt")" == 20 ]] || fail "TP=2 x PP=2: not one line per iteration"
grep -q '^using world size: 4, data-parallel size: 1, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2$' \
  "$WORK/out.txt" || fail "TP=2 x PP=2: no layout line"
# Megatron's order: tensor-parallel ranks adjacent, stages farthest apart.
grep -q '^> tensor-model-parallel groups: \[0, 1\] \[2, 3\] (mpi)$' "$WORK/out.txt" || fail "TP=2 x PP=2: TP groups"
grep -q '^> pipeline-model-parallel groups: \[0, 2\] \[1, 3\] (mpi), layers per stage 2, 2, 1F1B schedule$' \
  "$WORK/out.txt" || fail "TP=2 x PP=2: PP groups"
[[ "$(grep -c '^ > number of parameters on (tensor, pipeline) model parallel rank ([01], [01]): ' "$WORK/out.txt")" == 4 ]] ||
  fail "TP=2 x PP=2: not one parameter count per model-parallel rank"
grep -q "successfully saved checkpoint from iteration      10 to $WORK/ckpt \[ t 1/2, p 1/2 \]" "$WORK/out.txt" ||
  fail "TP=2 x PP=2: no save line"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-tp2-pp2.jsonl" same

# The checkpoint of iteration 10 continues the one-rank curve on one rank.
mkdir "$WORK/from-10"
cp -r "$WORK/ckpt/iter_0000010" "$WORK/from-10/"
echo 10 >"$WORK/from-10/latest_checkpointed_iteration.txt"
[[ "$(ls "$WORK/from-10/iter_0000010" | tr '\n' ' ')" == "mp_rank_00_000.h5 mp_rank_00_001.h5 mp_rank_01_000.h5 mp_rank_01_001.h5 " ]] ||
  fail "TP=2 x PP=2: not one file per tensor-parallel rank and stage"
expect_status 0 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --load "$WORK/from-10" --metrics-file "$WORK/gpt2-from-10.jsonl"
compare_curves "$WORK/gpt2-1.jsonl" "$WORK/gpt2-from-10.jsonl" continues

expect_status 0 "$BIN/mgt-train" "${PIPE_LLAMA[@]}" --metrics-file "$WORK/llama-1.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${PIPE_LLAMA[@]}" --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer \
  --metrics-file "$WORK/llama-tp2-pp2-sp.jsonl"
grep -q '^> tensor-model-parallel groups: \[0, 1\] \[2, 3\] (mpi), sequence parallel$' "$WORK/out.txt" ||
  fail "TP=2 x PP=2: sequence parallelism not reported"
compare_curves "$WORK/llama-1.jsonl" "$WORK/llama-tp2-pp2-sp.jsonl" same
echo "mgt-train tensor x pipeline parallelism: all checks passed"
