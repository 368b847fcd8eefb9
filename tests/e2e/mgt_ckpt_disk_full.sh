#!/usr/bin/env bash
# End-to-end checks of a full disk during a save, on a 2 MiB tmpfs: mgt-train saving every
# iteration until the disk fills, and mgt-ckpt-convert writing an mgt checkpoint there, each end
# with exit status 1 and one clear message (no crash in HDF5's clean-up at exit), leave no
# staging directory or partial output, and keep the previous checkpoint loadable; two
# tensor-parallel ranks, each writing its own shard, abandon the save together; a save written in
# the background (--async-save) fails the run the same way.
# Needs root and a mount(8) that may mount tmpfs; otherwise it says so and reports skipped.
# Usage: bash tests/e2e/mgt_ckpt_disk_full.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

MNT="$WORK/small"
mkdir "$MNT"
if [[ $(id -u) != 0 ]] || ! mount -t tmpfs -o size=2m tmpfs "$MNT" 2>/dev/null; then
  echo "skipped: mounting a small tmpfs needs root and a mount that allows it"
  exit 77  # ctest: skipped
fi
trap 'umount "$MNT" 2>/dev/null || true; rm -rf "$work"' EXIT

one_line_error() {  # the error is one line ("mgt-...: message") mentioning each argument
  local line
  line="$(grep '^mgt-[a-z-]*: ' "$WORK/err.txt")" || fail "no error line: $(cat "$WORK/err.txt")"
  [[ $(wc -l <<<"$line") == 1 ]] || fail "error is not one line: $line"
  for text in "$@"; do
    grep -qF -- "$text" <<<"$line" || fail "error does not mention '$text': $line"
  done
}
no_staging_left() {  # $1: a save directory
  ! ls -A "$1" | grep -q '\.tmp' || fail "temporaries left in $1: $(ls -A "$1")"
}

# About 0.6 MiB per checkpoint (weights and two AdamW moments of ~50k parameters): two fit in
# 2 MiB, the third does not.
MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3
       --mock-data --tokenizer-type NullTokenizer --vocab-size 1000 --eval-iters 0 --log-interval 1)

# mgt-train saving every iteration until the disk is full.
D="$MNT/ckpt"
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 50 --save "$D" --save-interval 1
one_line_error "mgt-train: " "No space left on device"
no_staging_left "$D"
saved="$(cat "$D/latest_checkpointed_iteration.txt")"
(( saved >= 1 )) || fail "no checkpoint before the disk filled"
for dir in "$D"/iter_*; do  # every committed iteration is whole, the tracker's included
  expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$dir" \
    --save-dir "$WORK/check-$(basename "$dir")"
done
[[ -d "$D/iter_$(printf '%07d' "$saved")" ]] || fail "the tracker names a missing iteration"
# The previous checkpoint resumes (saving elsewhere).
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 50 --exit-interval $((saved + 1)) --load "$D"
grep -q "successfully loaded checkpoint from $D .* at iteration $saved" "$WORK/out.txt" ||
  fail "the last checkpoint does not resume"

# mgt-ckpt-convert writing an mgt checkpoint into what is left of the disk: no output at all.
rm -rf "$D"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 1 --save "$WORK/source" --save-interval 1
head -c $((1900 * 1024)) /dev/zero >"$MNT/filler" 2>/dev/null || true
expect_status 1 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/source" \
  --save-dir "$MNT/converted"
one_line_error "mgt-ckpt-convert: " "No space left on device"
[[ ! -e "$MNT/converted" ]] || fail "the failed conversion left $(ls -A "$MNT/converted") in its output directory"
# Into an existing empty directory: emptied again, not removed.
mkdir "$MNT/empty"
expect_status 1 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/source" \
  --save-dir "$MNT/empty"
one_line_error "mgt-ckpt-convert: " "No space left on device"
[[ -d "$MNT/empty" && -z "$(ls -A "$MNT/empty")" ]] || fail "the failed conversion left output behind"

# Two tensor-parallel ranks saving every iteration until the disk is full: each writes its own
# file, so one rank's failed write must abort the save on both; no staging directory is left, and
# the last complete checkpoint (both ranks' files) stays the latest and resumes on one rank.
rm -rf "${MNT:?}"/*
source "$SRC/tests/e2e/lib/parallel_training.bash"
P="$MNT/ckpt-tp2"
expect_status 1 ranks 2 "$BIN/mgt-train" "${MODEL[@]}" --tensor-model-parallel-size 2 --train-iters 50 --save "$P" \
  --save-interval 1
grep -q "No space left on device" "$WORK/err.txt" || fail "TP=2: no disk-full message: $(cat "$WORK/err.txt")"
grep -q "is intact" "$WORK/err.txt" || fail "TP=2: the message does not say the last checkpoint is intact"
no_staging_left "$P"
saved="$(cat "$P/latest_checkpointed_iteration.txt")"
(( saved >= 1 )) || fail "TP=2: no checkpoint before the disk filled"
[[ "$(ls "$P/iter_$(printf '%07d' "$saved")" | tr '\n' ' ')" == "mp_rank_00.h5 mp_rank_01.h5 " ]] ||
  fail "TP=2: the last checkpoint lacks a rank's file"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 50 --exit-interval $((saved + 1)) --load "$P"
grep -q "successfully loaded checkpoint from $P .* at iteration $saved" "$WORK/out.txt" ||
  fail "TP=2: the last checkpoint does not resume on one rank"

# The same with --async-save: the write that fails on the background thread stops the run when
# the save is finalized, with one line naming the file; the previous checkpoint is the latest.
rm -rf "${MNT:?}"/*
A="$MNT/ckpt-async"
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 50 --save "$A" --save-interval 1 --async-save
one_line_error "mgt-train: " "No space left on device" "$A/" "is intact"
no_staging_left "$A"
saved="$(cat "$A/latest_checkpointed_iteration.txt")"
(( saved >= 1 )) || fail "async: no checkpoint before the disk filled"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 50 --exit-interval $((saved + 1)) --load "$A"
grep -q "successfully loaded checkpoint from $A .* at iteration $saved" "$WORK/out.txt" ||
  fail "async: the last checkpoint does not resume"

echo "disk full e2e: all checks passed"
