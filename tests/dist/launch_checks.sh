#!/usr/bin/env bash
# Launch checks for the distributed runtime, run by ctest as dist.launch:
#   launch_checks.sh TEST_BINARY MPIEXEC [MPIEXEC_FLAGS...]
# Every launch is wrapped in `timeout`, so a regression shows up as a failure, never a hang.
set -uo pipefail
bin=$1
mpiexec=$2
shift 2
flags=("$@")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "---- output ----" >&2
  cat "$log" >&2
  exit 1
}

# expect CODE PATTERN DESCRIPTION -- COMMAND...: the command exits with CODE (or any failure
# other than a timeout when CODE is "nonzero") and its output matches PATTERN.
expect() {
  local want=$1 pattern=$2 what=$3
  shift 4
  "$@" >"$log" 2>&1
  local rc=$?
  if [ "$want" = nonzero ]; then
    { [ $rc -ne 0 ] && [ $rc -ne 124 ]; } || fail "$what: exit status $rc"
  else
    [ $rc -eq "$want" ] || fail "$what: exit status $rc, expected $want"
  fi
  [ -z "$pattern" ] || grep -Eq -- "$pattern" "$log" || fail "$what: no line matching '$pattern'"
  echo "ok: $what"
}

# A lone process while Slurm announces 4 tasks (srun without --mpi=pmi2, or a plain command in
# a multi-task allocation): refused before MPI starts, with the launch lines to use.
expect 2 'SLURM_NTASKS=4 .*srun --mpi=pmi2 -n 4 .*mpiexec -n 4' \
  "lone process with SLURM_NTASKS=4" -- env SLURM_NTASKS=4 timeout 60 "$bin"
expect 2 'SLURM_NPROCS=2 .*srun --mpi=pmi2 -n 2' \
  "lone process with SLURM_NPROCS=2" -- env SLURM_NPROCS=2 timeout 60 "$bin"
[ "$(env SLURM_NTASKS=4 timeout 60 "$bin" 2>&1 | wc -l)" -eq 1 ] ||
  fail "the refusal is not one line"

# Open MPI's variable on a lone process: MPI starts as a singleton, finds a world of 1, refuses.
expect 2 'OMPI_COMM_WORLD_SIZE=2 .*mpiexec -n 2' \
  "MPI singleton with OMPI_COMM_WORLD_SIZE=2" -- env OMPI_COMM_WORLD_SIZE=2 timeout 60 "$bin"

# An MPI world of 1 under mpiexec while Slurm announces 4 tasks.
expect 2 'SLURM_NTASKS=4 .*srun --mpi=pmi2 -n 4' \
  "mpiexec -n 1 with SLURM_NTASKS=4" -- \
  timeout 60 "$mpiexec" -n 1 "${flags[@]}" env SLURM_NTASKS=4 "$bin"

# A matching announcement is fine.
expect 0 'All tests passed' "mpiexec -n 2 with SLURM_NTASKS=2" -- \
  timeout 120 "$mpiexec" -n 2 "${flags[@]}" env SLURM_NTASKS=2 "$bin" "[layout]"

# Rank 1 never reaches an all-reduce: rank 0's watchdog (2 s here) ends the whole job, naming
# the rank, the operation and the group, under the program's name as its other errors are.
expect nonzero '^mgt-dist-tests: rank 0: all_reduce \(sum\) of 1 float64 on the world group \[0, 1\] did not finish within 2 s' \
  "watchdog ends a job whose rank never arrives" -- \
  env MGT_DIST_TEST_TIMEOUT_SECONDS=2 timeout 120 "$mpiexec" -n 2 "${flags[@]}" "$bin" "[watchdog_hang]"

# The same for a started all-reduce (--overlap-grad-reduce's): watched from its start to its wait.
expect nonzero '^mgt-dist-tests: rank 0: all_reduce \(sum\) of 3 float32 on the world group \[0, 1\] did not finish within 2 s' \
  "watchdog ends a job whose rank never starts a started collective" -- \
  env MGT_DIST_TEST_TIMEOUT_SECONDS=2 timeout 120 "$mpiexec" -n 2 "${flags[@]}" "$bin" "[watchdog_hang_started]"

# Rank 1 dies before the all-reduce: the job ends (the launcher, or the watchdog) with an error.
expect nonzero '' "a dead rank ends the job" -- \
  env MGT_DIST_TEST_TIMEOUT_SECONDS=5 timeout 120 "$mpiexec" -n 2 "${flags[@]}" "$bin" "[rank_exit]"
echo "all launch checks passed"
