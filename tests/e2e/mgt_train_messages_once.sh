#!/usr/bin/env bash
# End-to-end check that mgt-train's notes and refusals are the job's, printed once, not once per
# rank: under mpiexec -n 2, the ignored-flags line, a refusal found while reading the command line
# (before MPI starts), a usage error found once the ranks are known, and a note of validation
# each appear once on standard error.
# Usage: bash tests/e2e/mgt_train_messages_once.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

MPIEXEC="$(command -v mpiexec)" || fail "no mpiexec"
LAUNCHER=()
# Hydra's fork launcher keeps the ranks on this machine even inside a Slurm allocation.
if "$MPIEXEC" --version 2>/dev/null | grep -q HYDRA; then LAUNCHER=(-launcher fork); fi
export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1
two_ranks() { env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_STEP_NUM_TASKS "$MPIEXEC" -n 2 "${LAUNCHER[@]}" "$@"; }

train=("$bin/mgt-train" --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 16
       --max-position-embeddings 16 --micro-batch-size 2 --lr 1e-3 --train-iters 1 --eval-iters 0 --mock-data
       --tokenizer-type NullTokenizer --vocab-size 127)

once() {  # once PATTERN: PATTERN matches exactly one line of standard error
  local n
  n=$(grep -c -- "$1" "$work/err.txt" || true)
  [[ $n == 1 ]] || { cat "$work/err.txt" >&2; fail "'$1' printed $n times on standard error, expected once"; }
}

expect_status 0 two_ranks "${train[@]}" --num-workers 2 --recompute-method uniform
once "^mgt-train: ignored flags (they change nothing here): --num-workers 2"
once "--recompute-method has no effect without --recompute-granularity full"

expect_status 2 two_ranks "${train[@]}" --enable-cuda-graph --no-such-flag
once "^mgt-train: --enable-cuda-graph is not supported by mgt-train: CUDA graphs"
once "^mgt-train: unknown flag --no-such-flag"

expect_status 2 two_ranks "${train[@]}" --recompute-granularity full
once "^mgt-train: --recompute-granularity full needs --recompute-method"

echo "mgt-train prints its notes and refusals once per job"
