#!/usr/bin/env bash
# mgt-train's --profile on the CPU backend: the per-operation table it announces is printed by
# the profiled rank at the end (host time per operation family over the step window), with the
# timeline of --profile-timeline; its sub-options need --profile; and --dp-collectives takes
# only its two values.
# Usage: bash tests/e2e/mgt_train_profile.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1

RUN=(--device cpu --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
     --train-iters 4 --log-interval 2 --eval-iters 0 --mock-data --tokenizer-type NullTokenizer
     --vocab-size 100)

expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --profile --profile-step-start 1 --profile-step-end 3 \
  --profile-timeline "$WORK/timeline.csv"
grep -q "^> --profile: host time per operation of iterations 2 to 3, printed by the profiled ranks at the end$" \
  "$WORK/out.txt" || fail "no announcement: $(cat "$WORK/out.txt")"
grep -q "^CPU time per operation (--profile), [0-9]* operations:$" "$WORK/err.txt" ||
  fail "no table on standard error: $(cat "$WORK/err.txt")"
for op in linear_forward linear_backward_weight attention_forward adamw_step total; do
  grep -qE "^  $op +[0-9.]+ ms" "$WORK/err.txt" || fail "no $op row: $(cat "$WORK/err.txt")"
done
[[ "$(head -n 1 "$WORK/timeline.csv")" == "op,gpu_start_ms,gpu_ms,host_begin_ms" ]] ||
  fail "no timeline header: $(head -n 2 "$WORK/timeline.csv")"
# The timeline holds every operation the table counts.
counted=$(sed -n 's/^CPU time per operation (--profile), \([0-9]*\) operations:$/\1/p' "$WORK/err.txt")
[[ "$(($(wc -l <"$WORK/timeline.csv") - 1))" == "$counted" ]] || fail "timeline of $(wc -l <"$WORK/timeline.csv") lines for $counted operations"

# Without --profile nothing is timed and nothing printed.
expect_status 0 "$BIN/mgt-train" "${RUN[@]}"
! grep -q "time per operation" "$WORK/err.txt" "$WORK/out.txt" || fail "a table without --profile"

# The sub-options need --profile; --dp-collectives takes copy-engines or nccl.
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --profile-gemms
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --profile-gemms needs --profile" ]] || fail "--profile-gemms alone: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --profile-timeline "$WORK/t.csv"
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --profile-timeline needs --profile" ]] || fail "--profile-timeline alone: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --dp-collectives kernels
[[ "$(wc -l <"$WORK/err.txt")" == 1 ]] && grep -q -- "--dp-collectives" "$WORK/err.txt" && grep -q "copy-engines" "$WORK/err.txt" ||
  fail "--dp-collectives kernels: $(cat "$WORK/err.txt")"
expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --dp-collectives nccl
# A bad thread count is named, not ignored.
MGT_NUM_THREADS=many expect_status 2 "$BIN/mgt-train" "${RUN[@]}"
[[ "$(cat "$WORK/err.txt")" == "mgt-train: MGT_NUM_THREADS: expected a whole number of threads from 1, got 'many'" ]] ||
  fail "MGT_NUM_THREADS=many: $(cat "$WORK/err.txt")"
echo "mgt-train --profile on the CPU: all checks passed"
