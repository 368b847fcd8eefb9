#!/usr/bin/env bash
# Check of tools/gpu/profile_steady.py, which the GPU scripts use to read --profile's
# reports: the table of a profiled window divided by its iterations, one rank's lines of a log
# written with mpiexec's -prepend-rank, a scaled baseline, and a one-line error for a log without
# a report.
# Usage: bash tests/e2e/profile_steady.sh BIN_DIR SOURCE_DIR
set -euo pipefail
src=$2
source "$src/tests/e2e/lib/common.bash"
tool=$src/tools/gpu/profile_steady.py

# A report as the CUDA backend prints it: GEMMs at `gemm` ms, AdamW at `adam` ms in all.
report() {  # report FILE PREFIX GEMM_MS GEMM_CALLS ADAM_MS
  {
    printf '%sGPU time per operation (--profile), 9 operations:\n' "$2"
    printf '%s  %-28s %10.2f ms %6.1f%% %8d calls %10.2f ms host\n' "$2" linear_forward "$3" 90.0 "$4" 1.0
    printf '%s  %-28s %10.2f ms %6.1f%% %8d calls %10.2f ms host\n' "$2" adamw "$5" 10.0 "$(($4 / 10))" 0.5
    printf '%s  %-28s %10.2f ms %17s %10.2f ms host\n' "$2" total 0 "" 1.5
    printf '%s  %-28s %10.2f ms in %d waits\n' "$2" host_blocked 20.0 30
  } >> "$1"
}
report "$work/one.log" "" 100 100 10
report "$work/one-rank.log" "[0] " 100 100 10
report "$work/tp.log" "[0] " 60 100 5
report "$work/tp.log" "[1] " 999 100 99

out=$(python3 "$tool" "$work/one.log" 10)
grep -q "steady-state per iteration: GPU 11.00 ms (event spans), host issuing 0.15 ms, host blocked 2.00 ms in 3 waits" <<< "$out" ||
  fail "one GPU: $out"
grep -qE "linear_forward +10.000 ms +90.9% +10 calls" <<< "$out" || fail "one GPU's GEMM row: $out"

# Rank 0 of the TP run against one GPU (launched the same way) halved: GEMMs 6.0 against 5.0 ms,
# AdamW 0.5 against 0.5.
out=$(python3 "$tool" "$work/tp.log" 10 --rank 0 --against "$work/one-rank.log" --scale 0.5)
grep -q "steady-state per iteration: GPU 6.50 ms" <<< "$out" || fail "rank 0 alone: $out"
grep -q "baseline x 0.5 GPU 5.50 ms" <<< "$out" || fail "the scaled baseline: $out"
grep -qE "linear_forward +6.000 ms +5.000 ms +\+1.000 ms" <<< "$out" || fail "the GEMMs' difference: $out"

expect_status 1 python3 "$tool" "$work/one.log" 10 --rank 1
grep -q "no --profile report of rank 1" "$work/err.txt" || fail "no report: $(cat "$work/err.txt")"
