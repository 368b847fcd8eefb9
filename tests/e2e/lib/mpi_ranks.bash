# Sourced by the end-to-end scripts that launch several ranks (after common.bash): the MPI
# launcher and `ranks N command...`. Not a test itself.

MPIEXEC="$(command -v mpiexec)" || fail "no mpiexec"
LAUNCHER=()
# Hydra's fork launcher keeps the ranks on this machine even inside a Slurm allocation.
if "$MPIEXEC" --version 2>/dev/null | grep -q HYDRA; then LAUNCHER=(-launcher fork); fi
# One thread per rank (2 cores); the one-rank references use the same, so each GEMM is the same.
export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1
# ranks N command...: N ranks, kept from an enclosing allocation's task count.
ranks() {
  local n=$1; shift
  env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_STEP_NUM_TASKS "$MPIEXEC" -n "$n" "${LAUNCHER[@]}" "$@"
}
