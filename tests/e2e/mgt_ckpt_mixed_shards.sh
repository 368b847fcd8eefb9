#!/usr/bin/env bash
# End-to-end check that a checkpoint assembled from files that do not belong together is refused
# by every program that reads it, with one line naming the files: a shard of another run (other
# arguments) in a tensor-parallel checkpoint, a shard copied under another rank's name, and an
# iteration directory holding another iteration's shards. Silently they would load a model that
# no run trained.
# Usage: bash tests/e2e/mgt_ckpt_mixed_shards.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e/lib/common.bash"

GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")
MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --lr 1e-3 --log-interval 1 --eval-iters 0 --mock-data "${GPT2[@]}")
# Two runs (other seeds), each resharded to two tensor-parallel ranks.
for seed in 1234 999; do
  "$BIN/mgt-train" "${MODEL[@]}" --seed "$seed" --train-iters 2 --save "$WORK/run$seed" --save-interval 2 \
    >/dev/null 2>&1 || fail "could not train the checkpoint of seed $seed"
  "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/run$seed" \
    --save-dir "$WORK/tp$seed" --target-tensor-parallel-size 2 >/dev/null 2>&1 || fail "could not reshard seed $seed"
done
ITER=iter_0000002
head -n 2 "$SRC/datasets/lambada_test.jsonl" >"$WORK/lambada.jsonl"

refused_by_all() {  # refused_by_all DIR PATTERN: every reader exits 1 with one line matching PATTERN
  local dir=$1 pattern=$2
  expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 4 --load "$dir"
  grep -q "^mgt-train: .*$pattern" "$WORK/err.txt" || fail "mgt-train loaded $dir: $(tail -2 "$WORK/err.txt")"
  expect_status 1 "$BIN/mgt-eval" --task LAMBADA --valid-data "$WORK/lambada.jsonl" --load "$dir"
  grep -q "^mgt-eval: .*$pattern" "$WORK/err.txt" || fail "mgt-eval read $dir: $(tail -2 "$WORK/err.txt")"
  expect_status 1 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$dir" \
    --save-dir "$WORK/out-$(basename "$dir")" --target-tensor-parallel-size 1
  grep -q "^mgt-ckpt-convert: .*$pattern" "$WORK/err.txt" || fail "mgt-ckpt-convert read $dir: $(tail -2 "$WORK/err.txt")"
}

# The unmixed checkpoint reads.
expect_status 0 "$BIN/mgt-eval" --task LAMBADA --valid-data "$WORK/lambada.jsonl" --load "$WORK/tp1234"

# Rank 1 of the other run.
cp -r "$WORK/tp1234" "$WORK/mixed"
cp "$WORK/tp999/$ITER/mp_rank_01.h5" "$WORK/mixed/$ITER/mp_rank_01.h5"
refused_by_all "$WORK/mixed" "mp_rank_01.h5 and mp_rank_00.h5 were saved by different runs"

# Rank 0's file copied in as a third rank.
cp -r "$WORK/tp1234" "$WORK/copied"
cp "$WORK/copied/$ITER/mp_rank_00.h5" "$WORK/copied/$ITER/mp_rank_02.h5"
refused_by_all "$WORK/copied" "mp_rank_02.h5 holds the part of tensor rank 0, .*which its name does not"

# Iteration 2's shards under iteration 4's name, which the tracker names.
mkdir -p "$WORK/moved"
cp -r "$WORK/run1234/$ITER" "$WORK/moved/iter_0000004"
echo 4 >"$WORK/moved/latest_checkpointed_iteration.txt"
refused_by_all "$WORK/moved" "iter_0000004 holds the shards of iteration 2"
echo "mgt-ckpt mixed shards e2e: ok"
