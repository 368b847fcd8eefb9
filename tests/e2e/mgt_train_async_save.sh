#!/usr/bin/env bash
# End-to-end checks of --async-save on two CPU ranks (data-parallel, distributed optimizer: each
# rank writes files of its own): the run trains exactly as one saving synchronously and commits
# the same checkpoints, reporting each rank's bytes and write speed; a run killed with SIGKILL
# while its background writer is mid-file (held there by --async-save-delay-ms) leaves the
# previous checkpoint the latest and loadable, and resuming from it continues the synchronous
# run's curve bit for bit. --async-save with Megatron's legacy --ckpt-format torch is refused.
# Usage: bash tests/e2e/mgt_train_async_save.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

RUN=("${GPT2[@]}" --use-distributed-optimizer --save-interval 10 --eval-iters 0)
no_staging_left() {  # $1: a save directory
  ! ls -A "$1" | grep -q '\.tmp' || fail "temporaries left in $1: $(ls -A "$1")"
}

# The reference: synchronous saves at 10 and 20.
expect_status 0 ranks 2 "$BIN/mgt-train" "${RUN[@]}" --save "$WORK/sync" --metrics-file "$WORK/sync.jsonl"

# The same run saving in the background: the same training, the same checkpoints committed.
expect_status 0 ranks 2 "$BIN/mgt-train" "${RUN[@]}" --save "$WORK/async" --async-save --metrics-file "$WORK/async.jsonl"
compare_curves "$WORK/sync.jsonl" "$WORK/async.jsonl" same
[[ "$(cat "$WORK/async/latest_checkpointed_iteration.txt")" == 20 ]] || fail "async: the tracker does not name 20"
for it in 0000010 0000020; do
  [[ "$(ls "$WORK/async/iter_$it" | tr '\n' ' ')" == "mp_rank_00.h5 mp_rank_00_dp_000.h5 mp_rank_00_dp_001.h5 " ]] ||
    fail "async: iter_$it holds $(ls "$WORK/async/iter_$it")"
done
no_staging_left "$WORK/async"
for text in "checkpoint of iteration      10 copied to host memory; its files are written in the background" \
            "successfully saved checkpoint from iteration      10 to $WORK/async" \
            "successfully saved checkpoint from iteration      20 to $WORK/async"; do
  grep -qF "$text" "$WORK/out.txt" || fail "async: no line '$text'"
done
grep -qE '^  checkpoint write \[rank 1/2\]: [0-9]+ bytes in [0-9.]+ s, [0-9.]+ GB/s \(host copy [0-9.]+ s\)$' "$WORK/out.txt" ||
  fail "async: no write statistics of rank 1"
grep -qE '^  checkpoint write \[all 2 ranks\]: [0-9]+ bytes in [0-9.]+ s, [0-9.]+ GB/s aggregate \(iteration 10, in the background\)$' \
  "$WORK/out.txt" || fail "async: no aggregate write statistics"

# Killed mid-write: K holds the background-written iteration 10; the run resumed from it saves 20
# with a writer that pauses ten minutes before closing each file, and is killed there.
K="$WORK/killed"
mkdir "$K"
cp -r "$WORK/async/iter_0000010" "$K/"
echo 10 >"$K/latest_checkpointed_iteration.txt"
setsid bash -c 'source "$1"; shift; ranks 2 "$@"' _ "$SRC/tests/e2e/lib/mpi_ranks.bash" "$BIN/mgt-train" "${RUN[@]}" \
  --load "$K" --save "$K" --async-save --async-save-delay-ms 600000 >"$WORK/killed.out" 2>"$WORK/killed.err" &
job=$!
trap 'kill -KILL -- -"$job" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do
  grep -qs "checkpoint of iteration      20 copied to host memory" "$WORK/killed.out" &&
    compgen -G "$K/.iter_0000020.tmp-*/mp_rank_00_dp_001.h5" >/dev/null &&
    compgen -G "$K/.iter_0000020.tmp-*/mp_rank_00.h5" >/dev/null && break
  kill -0 "$job" 2>/dev/null || { cat "$WORK/killed.err" >&2; fail "the run to be killed ended early"; }
  sleep 0.1
done
compgen -G "$K/.iter_0000020.tmp-*/mp_rank_00.h5" >/dev/null || fail "the background writer did not start"
{ kill -KILL -- -"$job"; wait "$job"; } 2>/dev/null || true
[[ "$(cat "$K/latest_checkpointed_iteration.txt")" == 10 ]] || fail "killed: the tracker moved"
[[ ! -e "$K/iter_0000020" ]] || fail "killed: iteration 20 was committed"
compgen -G "$K/.iter_0000020.tmp-*" >/dev/null || fail "killed: no unfinished save left behind"

# Resumed: iteration 10 loads and the run continues the synchronous run's curve exactly, saving
# 20 (the killed save's leftovers cleared).
expect_status 0 ranks 2 "$BIN/mgt-train" "${RUN[@]}" --load "$K" --save "$K" --async-save \
  --metrics-file "$WORK/resumed.jsonl"
grep -qF "successfully loaded checkpoint from $K [ t 1/1, p 1/1 ] at iteration 10" "$WORK/out.txt" ||
  fail "resumed: not from iteration 10"
compare_curves "$WORK/sync.jsonl" "$WORK/resumed.jsonl" exact
[[ "$(cat "$K/latest_checkpointed_iteration.txt")" == 20 ]] || fail "resumed: iteration 20 not saved"
no_staging_left "$K"

# Megatron saves asynchronously in its distributed formats only.
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --save "$WORK/legacy" --async-save --ckpt-format torch
grep -q '^mgt-train: --async-save needs a distributed checkpoint format' "$WORK/err.txt" || fail "--ckpt-format torch"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --save "$WORK/legacy" --async-save-delay-ms 10
grep -q '^mgt-train: --async-save-delay-ms needs --async-save' "$WORK/err.txt" || fail "--async-save-delay-ms alone"
echo "ok"
