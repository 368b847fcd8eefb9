#!/usr/bin/env bash
# End-to-end checks of mgt-train with pipeline parallelism (mpiexec, CPU backend, Megatron's
# non-interleaved 1F1B schedule): PP=2 reproduces the one-rank run's losses (train and
# validation, every iteration, within 1e-5 relative) for a GPT-2-style model (tied embeddings:
# the last stage's copy of the word embedding) and a Llama-style one; PP=2 x DP=2 with the
# distributed optimizer, PP=4, an uneven split (--decoder-first-pipeline-num-layers) and PP=3
# with the embedding and the loss counted as layers do too,
# and a checkpoint of that split, converted to one rank or to the even split, continues;
# a PP=2 checkpoint is one file per stage, resumes bit for bit at PP=2 and continues the
# one-rank curve at PP=1, and a one-rank checkpoint continues at PP=2; --fp16's loss scaling
# changes no bit at PP=2 and its dynamic scale resumes exactly; splits Megatron rejects are usage
# errors.
# Usage: bash tests/e2e/mgt_train_pipeline_parallel.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# Four layers; micro-batches of 2, so an iteration has 4 micro-batches on one data-parallel rank
# (the 1F1B schedule has a warm-up, a steady phase and a cool-down) and 2 on each of two.
PIPE_GPT2=("${GPT2[@]}" --num-layers 4 --micro-batch-size 2)
PIPE_LLAMA=("${LLAMA[@]}" --num-layers 4 --micro-batch-size 2)

for model in PIPE_GPT2 PIPE_LLAMA; do
  declare -n FLAGS="$model"
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/$model-1.jsonl"
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --pipeline-model-parallel-size 2 \
    --metrics-file "$WORK/$model-pp2.jsonl"
  # Rank 0 prints Megatron's lines once each, the loss coming from the last stage.
  [[ "$(grep -c '] iteration ' "$WORK/out.txt")" == 20 ]] || fail "$model PP=2: not one line per iteration"
  grep -q '^using world size: 2, data-parallel size: 1, context-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 2$' \
    "$WORK/out.txt" || fail "$model PP=2: no layout line"
  grep -q '^> initialized pipeline model parallel with size 2$' "$WORK/out.txt" || fail "$model PP=2: no PP line"
  grep -q '^> pipeline-model-parallel groups: \[0, 1\] (mpi), layers per stage 2, 2, 1F1B schedule$' "$WORK/out.txt" ||
    fail "$model PP=2: no pipeline group line"
  grep -q '^ > number of parameters on (tensor, pipeline) model parallel rank (0, 1): ' "$WORK/out.txt" ||
    fail "$model PP=2: no parameter count of the last stage"
  [[ "$(grep -c 'validation loss at iteration 10 |' "$WORK/out.txt")" == 1 ]] || fail "$model PP=2: validation"
  compare_curves "$WORK/$model-1.jsonl" "$WORK/$model-pp2.jsonl" same
done

# PP=2 x DP=2 (Megatron's groups: pipeline [0, 2] [1, 3]), the optimizer state sharded.
expect_status 0 ranks 4 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --use-distributed-optimizer --metrics-file "$WORK/gpt2-pp2-dp2.jsonl"
grep -q '^> pipeline-model-parallel groups: \[0, 2\] \[1, 3\] (mpi), layers per stage 2, 2, 1F1B schedule$' \
  "$WORK/out.txt" || fail "PP=2 x DP=2: pipeline groups"
grep -q '^> data-parallel groups: \[0, 1\] \[2, 3\] (mpi)$' "$WORK/out.txt" || fail "PP=2 x DP=2: data-parallel groups"
compare_curves "$WORK/PIPE_GPT2-1.jsonl" "$WORK/gpt2-pp2-dp2.jsonl" same
# Four stages of one layer each.
expect_status 0 ranks 4 "$BIN/mgt-train" "${PIPE_LLAMA[@]}" --pipeline-model-parallel-size 4 \
  --metrics-file "$WORK/llama-pp4.jsonl"
compare_curves "$WORK/PIPE_LLAMA-1.jsonl" "$WORK/llama-pp4.jsonl" same
# An uneven split: one layer on the first stage, three on the last.
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --decoder-first-pipeline-num-layers 1 --metrics-file "$WORK/gpt2-pp2-uneven.jsonl"
grep -q 'layers per stage 1, 3, 1F1B schedule$' "$WORK/out.txt" || fail "uneven split not reported"
compare_curves "$WORK/PIPE_GPT2-1.jsonl" "$WORK/gpt2-pp2-uneven.jsonl" same
# The embedding and the loss counted as layers (Megatron's --account-for-*-in-pipeline-split):
# 4 layers + 2 over PP=3, so one transformer layer on the first and the last stage.
expect_status 0 ranks 3 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 3 \
  --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \
  --metrics-file "$WORK/gpt2-pp3-accounted.jsonl"
grep -q 'layers per stage 1, 2, 1, 1F1B schedule$' "$WORK/out.txt" || fail "accounted split not reported"
compare_curves "$WORK/PIPE_GPT2-1.jsonl" "$WORK/gpt2-pp3-accounted.jsonl" same
# Saved at 10 under that split, converted to one rank (and to an even PP=2, as convert.py splits),
# it continues the one-rank curve; the even PP=2 files hold two layers each.
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --decoder-first-pipeline-num-layers 1 --save "$WORK/uneven" --save-interval 10 --exit-interval 10
grep -aq '"first_layer": 1, "num_layers": 3' "$WORK/uneven/iter_0000010/mp_rank_00_001.h5" || fail "uneven: stage 2 layers"
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/uneven" \
  --save-dir "$WORK/uneven-to-1" --target-pipeline-parallel-size 1
expect_status 0 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --load "$WORK/uneven-to-1" --metrics-file "$WORK/uneven-to-1.jsonl"
compare_curves "$WORK/PIPE_GPT2-1.jsonl" "$WORK/uneven-to-1.jsonl" continues
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/uneven" \
  --save-dir "$WORK/uneven-even"
grep -aq '"first_layer": 2, "num_layers": 2' "$WORK/uneven-even/iter_0000010/mp_rank_00_001.h5" || fail "even: stage 2 layers"
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --decoder-first-pipeline-num-layers 1 --load "$WORK/uneven-even" --metrics-file "$WORK/uneven-again.jsonl"
compare_curves "$WORK/PIPE_GPT2-1.jsonl" "$WORK/uneven-again.jsonl" continues

# Save at PP=2 and stop at 10: each stage writes its own file.
CK="$WORK/ckpt"
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 --save "$CK" \
  --save-interval 5 --exit-interval 10 --metrics-file "$WORK/first-half.jsonl"
grep -q "successfully saved checkpoint from iteration      10 to $CK \[ t 1/1, p 1/2 \]" "$WORK/out.txt" ||
  fail "PP=2: no save line"
[[ "$(cat "$CK/latest_checkpointed_iteration.txt")" == 10 ]] || fail "tracker does not say 10"
[[ "$(ls "$CK/iter_0000010" | tr '\n' ' ')" == "mp_rank_00_000.h5 mp_rank_00_001.h5 " ]] ||
  fail "PP=2: not one file per stage"
grep -aq '"pipeline_model_parallel_size": 2, "data_parallel_size": 1' "$CK/iter_0000010/mp_rank_00_001.h5" ||
  fail "PP=2: layout not recorded"
cp -r "$CK" "$WORK/ckpt-to-1"
# Resumed at PP=2: the uninterrupted PP=2 run, bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 --save "$CK" \
  --save-interval 5 --load "$CK" --metrics-file "$WORK/second-half.jsonl"
grep -q "successfully loaded checkpoint from $CK \[ t 1/1, p 1/2 \] at iteration 10" "$WORK/out.txt" ||
  fail "PP=2 resume not reported"
compare_curves "$WORK/PIPE_GPT2-pp2.jsonl" "$WORK/second-half.jsonl" exact
# --fp16's loss scaling at PP=2: the last stage seeds the backward with the scaled loss, every
# stage unscales its gradients. A power-of-two scale changes no bit; a dynamic one growing every
# 3 iterations resumes from each stage's checkpoint file with the uninterrupted run's scales.
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 --fp16 --loss-scale 4096 \
  --metrics-file "$WORK/fp16-pp2.jsonl"
compare_curves "$WORK/PIPE_GPT2-pp2.jsonl" "$WORK/fp16-pp2.jsonl" exact
FP16=("${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 --fp16 --initial-loss-scale 1024 --loss-scale-window 3)
expect_status 0 ranks 2 "$BIN/mgt-train" "${FP16[@]}" --metrics-file "$WORK/fp16-dynamic.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${FP16[@]}" --save "$WORK/ckpt-fp16" --save-interval 5 --exit-interval 10 \
  --metrics-file "$WORK/fp16-dynamic-resumed.jsonl"
grep -aq '"hysteresis_tracker": ' "$WORK/ckpt-fp16/iter_0000010/mp_rank_00_001.h5" || fail "PP=2: no loss scaler state saved"
expect_status 0 ranks 2 "$BIN/mgt-train" "${FP16[@]}" --save "$WORK/ckpt-fp16" --save-interval 5 \
  --load "$WORK/ckpt-fp16" --metrics-file "$WORK/fp16-dynamic-resumed.jsonl"
compare_curves "$WORK/fp16-dynamic.jsonl" "$WORK/fp16-dynamic-resumed.jsonl" exact
python3 - "$WORK/fp16-dynamic.jsonl" "$WORK/fp16-dynamic-resumed.jsonl" <<'PY' || fail "PP=2: loss scales not resumed"
import json, sys
scales = [[j["loss_scale"] for j in map(json.loads, open(p)) if j["event"] == "train"] for p in sys.argv[1:]]
assert scales[0] == scales[1], scales
assert scales[0][0] == 1024.0 and scales[0][-1] == 1024.0 * 2 ** 6, scales[0]
PY
# Resumed on one rank: the one-rank curve continues.
expect_status 0 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --save "$WORK/ckpt-to-1" --save-interval 5 \
  --load "$WORK/ckpt-to-1" --metrics-file "$WORK/second-half-1.jsonl"
compare_curves "$WORK/PIPE_GPT2-1.jsonl" "$WORK/second-half-1.jsonl" continues
# And a one-rank checkpoint continues at PP=2 (the Llama-style model: untied output layer).
expect_status 0 "$BIN/mgt-train" "${PIPE_LLAMA[@]}" --save "$WORK/ckpt-1" --save-interval 10 --exit-interval 10
expect_status 0 ranks 2 "$BIN/mgt-train" "${PIPE_LLAMA[@]}" --pipeline-model-parallel-size 2 \
  --load "$WORK/ckpt-1" --metrics-file "$WORK/llama-1-to-pp2.jsonl"
compare_curves "$WORK/PIPE_LLAMA-1.jsonl" "$WORK/llama-1-to-pp2.jsonl" continues

# Usage errors: Megatron's split checks, printed once (the interleaved schedule's are in
# mgt_train_interleaved.sh).
expect_status 2 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 --num-layers 3
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --num-layers (3) must be divisible by --pipeline-model-parallel-size (2), or give --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers" ]] ||
  fail "layer split check not printed once: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --pipeline-model-parallel-size 2 \
  --decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 2
grep -q "the first and last stages must build all 4 layers" "$WORK/err.txt" || fail "uneven split check: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${PIPE_GPT2[@]}" --decoder-last-pipeline-num-layers 2
grep -q "need --pipeline-model-parallel-size > 1" "$WORK/err.txt" || fail "split without a pipeline accepted"
echo "mgt-train pipeline parallelism: all checks passed"
