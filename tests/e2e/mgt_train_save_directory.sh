#!/usr/bin/env bash
# End-to-end checks that a save directory has one writer and that committed checkpoints are
# never written over, with real processes: a second mgt-train on a --save that a running one
# holds is refused (exit 1, naming the directory and the holder's host and PID) and touches
# nothing; once the first is killed with SIGKILL, a new run takes the directory over. Without the
# tracker file, or with the tracker behind a complete iteration (a save killed between its rename
# and the tracker), a run resumes from the newest complete iteration instead of starting over or
# failing, and a run that would save an iteration the directory already holds stops before training.
# A release checkpoint starts a run at iteration 0 from its weights.
# Usage: bash tests/e2e/mgt_train_save_directory.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")
head -n 300 "$SRC/datasets/corpus-tinyshakespeare.jsonl" >"$WORK/corpus.jsonl"
"$BIN/mgt-tokenize" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/shak" "${GPT2[@]}" --append-eod \
  --quiet >/dev/null 2>&1
MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
       --data-path "$WORK/shak_text_document" --split 90,5,5 --data-cache-path "$WORK/cache"
       --eval-iters 0 --log-interval 1 "${GPT2[@]}")
D="$WORK/run"
LOCK="$D/.mgt-writer.lock"
one_line_error() {  # the error is one line ("mgt-...: message") mentioning each argument
  local line
  line="$(grep '^mgt-[a-z-]*: ' "$WORK/err.txt")" || fail "no error line: $(cat "$WORK/err.txt")"
  [[ $(wc -l <<<"$line") == 1 ]] || fail "error is not one line: $line"
  for text in "$@"; do
    grep -qF -- "$text" <<<"$line" || fail "error does not mention '$text': $line"
  done
}

# A long run holds D.
"$BIN/mgt-train" "${MODEL[@]}" --train-iters 100000 --save "$D" --save-interval 100000 \
  >"$WORK/first.txt" 2>"$WORK/first.err" &
first=$!
holder=
trap 'kill -KILL "$first" $holder 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do
  grep -q "pid=$first" "$LOCK" 2>/dev/null && break
  kill -0 "$first" 2>/dev/null || { cat "$WORK/first.err" >&2; fail "the first run ended early"; }
  sleep 0.1
done
grep -q "pid=$first" "$LOCK" || fail "the first run did not record itself in $LOCK"
grep -q "host=$(hostname)" "$LOCK" || fail "lock file does not name the host: $(cat "$LOCK")"

# A staging directory of the running writer (as if it were saving) must survive a refused run.
mkdir "$D/.iter_0000007.tmp-$first"

# A second writer is refused at once, naming the directory and the holder.
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 2 --save "$D" --save-interval 1
one_line_error "mgt-train: " "$D" "host $(hostname)" "pid $first"
[[ -d "$D/.iter_0000007.tmp-$first" ]] || fail "the refused run removed the running writer's staging directory"
[[ ! -e "$D/iter_0000001" ]] || fail "the refused run saved a checkpoint"
kill -0 "$first" 2>/dev/null || fail "the first run did not survive the second one"

# mgt-ckpt-convert writing an mgt checkpoint takes the same lock: an empty output directory
# that another process has locked is refused, and left as it was.
mkdir "$WORK/busy"
(exec 9>"$WORK/busy/.mgt-writer.lock" && flock -n 9 && exec sleep 600) >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do [[ -e "$WORK/busy/.mgt-writer.lock" ]] && break; sleep 0.1; done
expect_status 1 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/nowhere" \
  --save-dir "$WORK/busy"
one_line_error "mgt-ckpt-convert: " "$WORK/busy is being written by another process"
[[ -e "$WORK/busy/.mgt-writer.lock" ]] || fail "the refused conversion removed the other writer's lock file"
kill "$holder"
wait "$holder" 2>/dev/null || true

# SIGKILL: the kernel drops the lock; the next run takes D over and clears the dead run's staging.
kill -KILL "$first"
wait "$first" 2>/dev/null || true
# (Every run below has --train-iters 8, the schedule of the checkpoints; --exit-interval stops.)
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --exit-interval 4 --save "$D" --save-interval 2
[[ ! -e "$D/.iter_0000007.tmp-$first" ]] || fail "the staging directory of the killed run was not cleared"
[[ "$(cat "$D/latest_checkpointed_iteration.txt")" == 4 ]] || fail "the new run did not save iteration 4"
[[ -s "$D/iter_0000002/mp_rank_00.h5" && -s "$D/iter_0000004/mp_rank_00.h5" ]] || fail "checkpoints missing"

# Without the tracker file, --load resumes from the newest complete iteration (and says so) rather
# than starting over; iteration 4's directory is not written again.
rm "$D/latest_checkpointed_iteration.txt"
before="$(md5sum "$D/iter_0000004/mp_rank_00.h5")"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --exit-interval 6 --load "$D" --save "$D" \
  --save-interval 2
grep -qF "resuming from $D/iter_0000004, its newest complete checkpoint" "$WORK/err.txt" ||
  fail "resume without a tracker file not reported: $(cat "$WORK/err.txt")"
grep -q "successfully loaded checkpoint from $D .* at iteration 4" "$WORK/out.txt" || fail "did not resume at 4"
! grep -q '] iteration        1/' "$WORK/out.txt" || fail "the run started over"
[[ "$(md5sum "$D/iter_0000004/mp_rank_00.h5")" == "$before" ]] || fail "iteration 4 was written again"
[[ "$(cat "$D/latest_checkpointed_iteration.txt")" == 6 ]] || fail "tracker does not say 6"

# The newest directory damaged: the newest complete one is 4, but resuming there would save 6
# again, so the run stops before training and leaves everything as it was.
rm "$D/latest_checkpointed_iteration.txt"
truncate -s 1000 "$D/iter_0000006/mp_rank_00.h5"
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --load "$D" --save "$D" --save-interval 2
grep -qF "$D/iter_0000006 is not complete" "$WORK/err.txt" || fail "damaged iteration not reported"
grep -qF "already holds iter_0000006" "$WORK/err.txt" || fail "the save over iteration 6 was not refused"
[[ "$(stat -c %s "$D/iter_0000006/mp_rank_00.h5")" == 1000 ]] || fail "iteration 6 was written over"
! grep -q '] iteration ' "$WORK/out.txt" || fail "the run trained although it could not save"

# No complete iteration at all: a clear stop, not a fresh start.
truncate -s 1000 "$D/iter_0000002/mp_rank_00.h5" "$D/iter_0000004/mp_rank_00.h5"
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --load "$D" --save "$D" --save-interval 2
one_line_error "none of its 3 iteration directories is a complete checkpoint" "$D/iter_0000002 is not complete"

# A run from scratch into a directory with checkpoints would write iteration 2 over: refused.
E="$WORK/other"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --exit-interval 2 --save "$E" --save-interval 2
before="$(md5sum "$E/iter_0000002/mp_rank_00.h5")"
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --save "$E" --save-interval 2
one_line_error "already holds iter_0000002" "--load $E"
[[ "$(md5sum "$E/iter_0000002/mp_rank_00.h5")" == "$before" ]] || fail "iteration 2 was written over"

# A save killed after it renamed iter_0000004 into place and before it moved the tracker leaves
# the tracker at 2: the same command resumes from 4 (saying so, naming both) instead of failing
# on every restart because 4 exists, and its next save moves the tracker on.
F="$WORK/behind"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --exit-interval 4 --save "$F" --save-interval 2
printf 2 >"$F/latest_checkpointed_iteration.txt"
touch -r "$F/iter_0000002" "$F/latest_checkpointed_iteration.txt"  # as old as the save that wrote it
before="$(md5sum "$F/iter_0000004/mp_rank_00.h5")"
for attempt in 1 2; do  # the second attempt finds the tracker moved on: an ordinary resume
  expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 8 --exit-interval $((4 + 2 * attempt)) \
    --load "$F" --save "$F" --save-interval 2
  if [[ $attempt == 1 ]]; then
    grep -qF "$F/latest_checkpointed_iteration.txt names iteration 2, but $F/iter_0000004 is a newer complete checkpoint" \
      "$WORK/err.txt" || fail "resume past the tracker not reported: $(cat "$WORK/err.txt")"
    grep -q "successfully loaded checkpoint from $F .* at iteration 4" "$WORK/out.txt" || fail "did not resume at 4"
  else
    ! grep -q "newer complete checkpoint" "$WORK/err.txt" || fail "the tracker was not moved on"
    grep -q "successfully loaded checkpoint from $F .* at iteration 6" "$WORK/out.txt" || fail "did not resume at 6"
  fi
  [[ "$(cat "$F/latest_checkpointed_iteration.txt")" == $((4 + 2 * attempt)) ]] || fail "tracker not moved on"
done
[[ "$(md5sum "$F/iter_0000004/mp_rank_00.h5")" == "$before" ]] || fail "iteration 4 was written again"

# A --save path that is a regular file: named as such, not as an existing directory.
touch "$WORK/a-file"
expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 2 --save "$WORK/a-file" --save-interval 2
one_line_error "cannot create checkpoint directory '$WORK/a-file': a file of that name is in the way"

# A release checkpoint (the tracker says "release") is weights, as in Megatron's load_checkpoint:
# the run starts at iteration 0 with a fresh optimizer, its data where the checkpoint's left off
# (consumed samples 16 after iteration 4 at 4 a step: the first logs 20).
R="$WORK/release"
mkdir -p "$R" && cp -r "$F/iter_0000004" "$R/release" && printf release >"$R/latest_checkpointed_iteration.txt"
expect_status 0 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 2 --load "$R" --lr-warmup-iters 0
grep -q "successfully loaded checkpoint from $R .* at iteration 0" "$WORK/out.txt" || fail "release not at iteration 0"
grep -q '] iteration        1/       2 | consumed samples:           20 ' "$WORK/out.txt" ||
  fail "release: iteration 1 does not follow the checkpoint's consumed samples: $(grep '] iteration' "$WORK/out.txt")"

echo "mgt-train save directory e2e: all checks passed"
