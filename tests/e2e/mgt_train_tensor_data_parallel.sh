#!/usr/bin/env bash
# End-to-end checks of mgt-train with tensor and data parallelism together on 4 ranks (mpiexec,
# CPU backend): TP=2 x DP=2, with the plain and the distributed optimizer (its state sharded
# within each tensor-parallel rank's data-parallel group), reproduces the one-rank run's losses
# (train and validation, every iteration, within 1e-5 relative) for a GPT-2-style and a
# Llama-style model; the groups are Megatron's.
# Usage: bash tests/e2e/mgt_train_tensor_data_parallel.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

for model in GPT2 LLAMA; do
  declare -n FLAGS="$model"
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/$model-1.jsonl"
  expect_status 0 ranks 4 "$BIN/mgt-train" "${FLAGS[@]}" --tensor-model-parallel-size 2 \
    --metrics-file "$WORK/$model-tp2-dp2.jsonl"
  [[ "$(grep -c '] iteration ' "$WORK/out.txt")" == 20 ]] || fail "$model TP=2 x DP=2: not one line per iteration"
  grep -q '^using world size: 4, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 1$' \
    "$WORK/out.txt" || fail "$model TP=2 x DP=2: no layout line"
  # Megatron's order: tensor-parallel ranks are adjacent.
  grep -q '^> tensor-model-parallel groups: \[0, 1\] \[2, 3\] (mpi)$' "$WORK/out.txt" ||
    fail "$model TP=2 x DP=2: tensor-parallel groups"
  grep -q '^> data-parallel groups: \[0, 2\] \[1, 3\] (mpi)$' "$WORK/out.txt" || fail "$model TP=2 x DP=2: data-parallel groups"
  compare_curves "$WORK/$model-1.jsonl" "$WORK/$model-tp2-dp2.jsonl" same

  # The Llama-style run adds sequence parallelism.
  extra=()
  [[ $model == LLAMA ]] && extra=(--sequence-parallel)
  expect_status 0 ranks 4 "$BIN/mgt-train" "${FLAGS[@]}" --tensor-model-parallel-size 2 --use-distributed-optimizer \
    "${extra[@]}" --metrics-file "$WORK/$model-tp2-dp2-distopt.jsonl"
  grep -q '^> distributed optimizer: each data-parallel rank keeps ' "$WORK/out.txt" || fail "no sharding line"
  compare_curves "$WORK/$model-1.jsonl" "$WORK/$model-tp2-dp2-distopt.jsonl" same
done
echo "mgt-train tensor x data parallelism: all checks passed"
