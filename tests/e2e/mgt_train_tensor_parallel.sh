#!/usr/bin/env bash
# End-to-end checks of mgt-train with tensor parallelism on 2 ranks (mpiexec, CPU backend): TP=2,
# with and without --sequence-parallel, reproduces the one-rank run's losses (train and
# validation, every iteration, within 1e-5 relative) for a GPT-2-style and a Llama-style model;
# only rank 0 prints, with Megatron's layout lines; Megatron-Core's first example (a 2-layer GPT
# on two tensor-parallel ranks, mock data, five iterations, saved, then loaded again); Megatron's
# tensor-parallel checks as usage errors printed once.
# Usage: bash tests/e2e/mgt_train_tensor_parallel.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

for model in GPT2 LLAMA; do
  declare -n FLAGS="$model"
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/$model-1.jsonl"
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --tensor-model-parallel-size 2 \
    --metrics-file "$WORK/$model-tp2.jsonl"
  # Only rank 0 prints Megatron's lines, once each.
  [[ "$(grep -c '] iteration ' "$WORK/out.txt")" == 20 ]] || fail "$model TP=2: not one line per iteration"
  grep -q '^using world size: 2, data-parallel size: 1, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 1$' \
    "$WORK/out.txt" || fail "$model TP=2: no layout line"
  grep -q '^> initialized tensor model parallel with size 2$' "$WORK/out.txt" || fail "$model TP=2: no TP line"
  grep -q '^> tensor-model-parallel groups: \[0, 1\] (mpi)$' "$WORK/out.txt" || fail "$model TP=2: no group line"
  [[ "$(grep -c '^ > number of parameters on (tensor, pipeline) model parallel rank ([01], 0): ' "$WORK/out.txt")" == 2 ]] ||
    fail "$model TP=2: not one parameter count per tensor-parallel rank"
  [[ "$(grep -c 'validation loss at iteration 10 |' "$WORK/out.txt")" == 1 ]] || fail "$model TP=2: validation"
  compare_curves "$WORK/$model-1.jsonl" "$WORK/$model-tp2.jsonl" same

  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
    --metrics-file "$WORK/$model-tp2-sp.jsonl"
  grep -q '^> tensor-model-parallel groups: \[0, 1\] (mpi), sequence parallel$' "$WORK/out.txt" ||
    fail "$model TP=2: sequence parallelism not reported"
  compare_curves "$WORK/$model-1.jsonl" "$WORK/$model-tp2-sp.jsonl" same
done

# Megatron-Core's first example (megatron/core/QuickStart.md): a 2-layer GPT on two
# tensor-parallel ranks, mock data, NullTokenizer over 100 ids, sequences of 64, five
# iterations, saved; then loaded again on two ranks, and continued to 10 on two ranks and on one.
# The example's Adam at a constant 0.01; the continuations keep the checkpoint's schedule.
QUICK=(--num-layers 2 --hidden-size 12 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
       --micro-batch-size 8 --lr 0.01 --lr-decay-style constant --log-interval 1 --eval-iters 0 --mock-data
       --tokenizer-type NullTokenizer --vocab-size 100 --data-cache-path "$WORK/mock-cache")
expect_status 0 ranks 2 "$BIN/mgt-train" "${QUICK[@]}" --tensor-model-parallel-size 2 --train-iters 5 \
  --save "$WORK/quick" --save-interval 5
grep -q '^ > padded vocab (size: 101) with 155 dummy tokens (new size: 256)$' "$WORK/out.txt" ||
  fail "quick start: vocabulary not padded for two tensor-parallel ranks"
grep -q "successfully saved checkpoint from iteration       5 to $WORK/quick \[ t 1/2, p 1/1 \]" "$WORK/out.txt" ||
  fail "quick start: no save line"
[[ "$(cat "$WORK/quick/latest_checkpointed_iteration.txt")" == 5 ]] || fail "quick start: tracker does not say 5"
[[ "$(ls "$WORK/quick/iter_0000005" | tr '\n' ' ')" == "mp_rank_00.h5 mp_rank_01.h5 " ]] ||
  fail "quick start: not one file per tensor-parallel rank"
expect_status 0 ranks 2 "$BIN/mgt-train" "${QUICK[@]}" --tensor-model-parallel-size 2 --train-iters 5 \
  --load "$WORK/quick"
grep -q "successfully loaded checkpoint from $WORK/quick \[ t 1/2, p 1/1 \] at iteration 5" "$WORK/out.txt" ||
  fail "quick start: the checkpoint was not loaded again"
cp -r "$WORK/quick" "$WORK/quick-1"
expect_status 0 ranks 2 "$BIN/mgt-train" "${QUICK[@]}" --tensor-model-parallel-size 2 --train-iters 10 \
  --load "$WORK/quick" --save "$WORK/quick" --save-interval 5 --use-checkpoint-opt_param-scheduler \
  --metrics-file "$WORK/quick-tp2.jsonl"
expect_status 0 "$BIN/mgt-train" "${QUICK[@]}" --train-iters 10 --load "$WORK/quick-1" --save "$WORK/quick-1" \
  --save-interval 5 --use-checkpoint-opt_param-scheduler --metrics-file "$WORK/quick-1.jsonl"
grep -q '^ > padded vocab of the checkpoint kept (size: 101) with 155 dummy tokens (new size: 256)$' "$WORK/out.txt" ||
  fail "quick start: one rank did not keep the checkpoint's padded vocabulary"
python3 - "$WORK/quick-tp2.jsonl" "$WORK/quick-1.jsonl" <<'PY' || fail "quick start: TP=2 and one rank continue differently"
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [j["iteration"] for j in a] == [j["iteration"] for j in b] == list(range(6, 11)), (a, b)
for x, y in zip(a, b):
    assert abs(x["lm_loss"] - y["lm_loss"]) <= 1e-5 * abs(x["lm_loss"]), (x, y)
PY

# Megatron's tensor-parallel checks, printed once by rank 0; the job exits 2.
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --num-attention-heads 3 \
  --kv-channels 16
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --num-attention-heads (3) must be divisible by --tensor-model-parallel-size (2)" ]] ||
  fail "heads check not printed once: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --ffn-hidden-size 129
grep -q "^mgt-train: --ffn-hidden-size (129) must be divisible by --tensor-model-parallel-size (2)$" "$WORK/err.txt" ||
  fail "ffn check: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --seq-length 63
grep -q "^mgt-train: --sequence-parallel: --seq-length (63) must be divisible by --tensor-model-parallel-size (2)$" \
  "$WORK/err.txt" || fail "sequence-parallel check: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 4
grep -q "^mgt-train: world size (2) is not divisible by tensor x pipeline x context parallel size (4)$" "$WORK/err.txt" ||
  fail "world size check: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
grep -q "^mgt-train: world size (2) is not divisible by tensor x pipeline x context parallel size (4)$" "$WORK/err.txt" ||
  fail "tensor x pipeline check: $(cat "$WORK/err.txt")"
# --sequence-parallel without tensor parallelism: Megatron's warning, then a plain run.
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" --sequence-parallel --train-iters 4 --eval-iters 0
grep -q "Disabling sequence parallelism because tensor model parallelism is disabled" "$WORK/err.txt" ||
  fail "no warning for --sequence-parallel at TP=1"
echo "mgt-train tensor parallelism: all checks passed"
