#!/usr/bin/env bash
# End-to-end checks that a failing rank ends the whole mgt-train job (mpiexec, CPU backend): a
# rank killed mid-training ends the job at once with a non-zero status and a message naming that
# rank; a rank that crashes (SIGSEGV) names its rank and process before it dies; a rank that
# stops answering (SIGSTOP) ends it after --distributed-timeout-minutes, the
# waiting rank naming itself, the operation and the group. Neither leaves a process behind.
# Usage: bash tests/e2e/mgt_train_rank_failure.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# A run long enough to be interrupted.
LONG=("${GPT2[@]}")
for i in "${!LONG[@]}"; do
  [[ "${LONG[$i]}" == --train-iters ]] && LONG[$((i + 1))]=100000
done
# wait_job NAME SECONDS: the job ends within SECONDS with a non-zero status.
wait_job() {
  local name=$1 limit=$2 status
  for _ in $(seq $((limit * 10))); do
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$job" 2>/dev/null; then
    pkill -9 -P "$job" 2>/dev/null || true
    kill -9 "$job" 2>/dev/null || true
    fail "$name: the job still ran after $limit s"
  fi
  set +e
  wait "$job"
  status=$?
  set -e
  [[ $status != 0 ]] || fail "$name: the job exited 0"
}
no_rank_left() {  # no_rank_left NAME: every rank process has ended within 10 s of the job
  local pid state
  for pid in $(cat "$WORK"/pid.* 2>/dev/null); do
    # A zombie (state Z) has ended; where nothing reaps orphans it stays listed. The launcher's
    # kill of the other ranks may land a moment after it exits.
    for _ in $(seq 100); do
      state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
      [[ -z "$state" || "$state" == Z ]] && break
      sleep 0.1
    done
    if [[ -n "$state" && "$state" != Z ]]; then
      kill -9 "$pid" 2>/dev/null || true
      fail "$1: rank process $pid (state $state) outlived the job by 10 s"
    fi
  done
}

# start_job NAME FLAGS...: two ranks in the background, each writing its pid to $WORK/pid.RANK
# first; returns once they train. $job is the launcher's pid.
start_job() {
  local name=$1
  shift
  rm -f "$WORK"/pid.*
  ranks 2 bash -c 'echo $$ > "$0/pid.${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-x}}"; exec "$@"' "$WORK" \
    "$BIN/mgt-train" "${LONG[@]}" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  job=$!
  for _ in $(seq 600); do
    grep -q 'iteration *2/' "$WORK/$name.out" "$WORK/$name.err" 2>/dev/null && return 0
    kill -0 "$job" 2>/dev/null || fail "$name: the job ended before training: $(tail -5 "$WORK/$name.err")"
    sleep 0.1
  done
  fail "$name: no training log line within 60 s"
}

# A rank killed: the launcher ends the job at once, naming the rank (srun: "task 1"), or, as
# MPICH's hydra does, its PID, which mgt-train's start-up table of rank processes turns into the
# rank.
# Without UCX's cross-memory-attach transport: the surviving rank's transfer into a process that
# is gone aborts it there (SIGABRT in uct_cma_ep_tx), and the launcher may then report the
# survivor's end instead of the killed rank's. Shared-memory segments leave the survivor waiting
# until the launcher ends it.
UCX_TLS='^cma' start_job killed
kill -9 "$(cat "$WORK/pid.1")"
wait_job killed 30
python3 - "$WORK/killed.out" "$WORK/killed.err" "$(cat "$WORK/pid.1")" <<'PY' || fail "killed: the dead rank is not named"
import re, sys
text = open(sys.argv[1]).read() + open(sys.argv[2]).read()
table = re.search(r"> rank processes \(host:pid\): (.*)", text)
assert table, "no rank processes line"
ranks = {pid: int(rank) for rank, pid in re.findall(r"(\d+) [^ ,]+:(\d+)", table.group(1))}
assert ranks.get(sys.argv[3]) == 1, (table.group(0), sys.argv[3])
named = re.search(r"\b(?:task|rank) 1\b", text)
reported = re.search(r"PID (\d+) RUNNING AT", text)
assert named or (reported and ranks.get(reported.group(1)) == 1), text[-2000:]
PY
no_rank_left killed

# A rank that crashes names itself (its rank beside the PID the launcher reports) before it dies
# (without a core file).
ulimit -c 0
start_job crashed
crashed=$(cat "$WORK/pid.1")
kill -SEGV "$crashed"
wait_job crashed 30
grep -Eq "^mgt-train: rank 1 \([^ ]+:$crashed\) killed by SIGSEGV\$" "$WORK/crashed.err" ||
  fail "crashed: the rank did not name itself: $(tail -5 "$WORK/crashed.err")"
no_rank_left crashed

# A rank stopped: the other's collective waits past --distributed-timeout-minutes 1, and its
# watchdog ends the job.
start_job stopped --distributed-timeout-minutes 1
kill -STOP "$(cat "$WORK/pid.1")"
wait_job stopped 100
grep -Eq '^mgt-train: rank 0: .* on the .* group \[0, 1\] did not finish within 1 min' "$WORK/stopped.err" ||
  fail "stopped: no watchdog message: $(tail -5 "$WORK/stopped.err")"
no_rank_left stopped
# Ranks started with different flags (MPMD): refused at start, in one line naming the rank and the
# first differing argument, with the usage status, instead of a NaN loss and a hung collective.
status=0
timeout 120 "$MPIEXEC" -n 1 "${LAUNCHER[@]}" "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 : \
  -n 1 "$BIN/mgt-train" "${GPT2[@]}" >"$WORK/mpmd.out" 2>"$WORK/mpmd.err" || status=$?
[[ $status == 2 ]] || fail "ranks with different flags: exit status $status: $(tail -3 "$WORK/mpmd.err")"
[[ $(grep -c '^mgt-train: rank 1 was started with other arguments than rank 0 (argument [0-9]* is nothing there and .--tensor-model-parallel-size. on rank 0)' \
  "$WORK/mpmd.err") == 1 ]] || fail "ranks with different flags: $(tail -3 "$WORK/mpmd.err")"
echo "mgt-train rank failures: all checks passed"
