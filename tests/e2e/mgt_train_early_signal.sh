#!/usr/bin/env bash
# mgt-train holds its exit signals from its first instruction: a notice to stop that arrives while
# the ranks still start (here rank 0 waits in MPI's start for rank 1, held back on purpose) does
# not kill the rank; the run stops at the end of its first iteration, saves and exits 0, as it
# does for a signal that comes during training. A signal the run does not stop on still acts as
# it would have: mgt-train without --exit-signal-handler dies of SIGUSR1, only once it has
# started.
# Usage: bash tests/e2e/mgt_train_early_signal.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e/lib/common.bash"
MPIEXEC="$(command -v mpiexec)" || fail "no mpiexec"
LAUNCHER=()
if "$MPIEXEC" --version 2>/dev/null | grep -q HYDRA; then LAUNCHER=(-launcher fork); fi
export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1

train=(--mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 2 --lr 1e-3
       --train-iters 100000 --log-interval 1 --eval-iters 0 --save-interval 100000 --device cpu
       --tokenizer-type NullTokenizer --vocab-size 64)

# catches SIG PID: whether process PID has a handler for SIG (/proc's SigCgt mask).
catches() {
  local mask
  mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$2/status" 2>/dev/null)
  [[ -n $mask ]] && (( (16#$mask >> ($(kill -l "$1") - 1)) & 1 ))
}

# start NAME FLAGS...: two ranks; rank 1 starts only once $WORK/go.NAME exists. Returns once
# rank 0 holds SIGUSR1 (it then waits in MPI's start for rank 1); $job is the launcher, $rank0
# rank 0's process.
start() {
  local name=$1
  shift
  env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_STEP_NUM_TASKS "$MPIEXEC" -n 2 "${LAUNCHER[@]}" bash -c '
      rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-x}}
      echo $$ > "$0/pid.$rank"
      if [[ $rank != 0 ]]; then until [[ -e $0/go.$1 ]]; do sleep 0.05; done; fi
      shift
      exec "$@"' "$WORK" "$name" "$BIN/mgt-train" "${train[@]}" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  job=$!
  for _ in $(seq 600); do
    if [[ -s $WORK/pid.0 ]]; then
      rank0=$(cat "$WORK/pid.0")
      if [[ $(readlink "/proc/$rank0/exe" 2>/dev/null) == */mgt-train ]] && catches USR1 "$rank0"; then return 0; fi
    fi
    kill -0 "$job" 2>/dev/null || fail "$name: the job ended at its start: $(tail -5 "$WORK/$name.err")"
    sleep 0.05
  done
  fail "$name: rank 0 did not hold SIGUSR1 within 30 s of its start"
}
finish() {  # finish NAME: lets rank 1 start; the job's exit status in $status
  touch "$WORK/go.$1"
  set +e
  wait "$job"
  status=$?
  set -e
  rm -f "$WORK"/pid.*
}

# The run's own exit signal, while rank 0 waits for rank 1: it stops after the first iteration.
start held --exit-signal-handler --exit-signal SIGUSR1 --save "$WORK/ckpt"
[[ $(ls "$WORK/ckpt" 2>/dev/null) == "" ]] || fail "held: a checkpoint before training"
kill -USR1 "$rank0"
sleep 0.5
kill -0 "$rank0" 2>/dev/null || fail "held: rank 0 died of SIGUSR1 while it started: $(tail -5 "$WORK/held.err")"
finish held
[[ $status == 0 ]] || fail "held: exit status $status: $(tail -5 "$WORK/held.err")"
grep -q 'exiting program after receiving SIGUSR1\.' "$WORK/held.out" "$WORK/held.err" ||
  fail "held: no stop on SIGUSR1: $(tail -5 "$WORK/held.err")"
[[ $(cat "$WORK/ckpt/latest_checkpointed_iteration.txt") == 1 ]] || fail "held: no checkpoint at iteration 1"

# SIGTERM is always handled (a preemption's notice): the same without --exit-signal-handler.
start term --save "$WORK/ckpt-term"
kill -TERM "$rank0"
finish term
[[ $status == 0 ]] || fail "term: exit status $status: $(tail -5 "$WORK/term.err")"
grep -q 'exiting program after receiving SIGTERM\.' "$WORK/term.out" "$WORK/term.err" || fail "term: no stop on SIGTERM"

# SIGUSR1 when the run does not stop on it: its default action, once the run's handler exists.
start unhandled
kill -USR1 "$rank0"
sleep 0.5
kill -0 "$rank0" 2>/dev/null || fail "unhandled: rank 0 died before its start was over"
finish unhandled
[[ $status != 0 ]] || fail "unhandled: an unhandled SIGUSR1 was swallowed (exit 0)"
grep -q 'exiting program after receiving' "$WORK/unhandled.out" "$WORK/unhandled.err" &&
  fail "unhandled: the run stopped as on its exit signal"
echo "mgt-train early signals: all checks passed"
