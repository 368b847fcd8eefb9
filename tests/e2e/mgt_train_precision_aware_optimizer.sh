#!/usr/bin/env bash
# End-to-end checks of --use-precision-aware-optimizer (Megatron's flag; Transformer Engine's
# FusedAdam keeping Adam's moments in the types of --exp-avg-dtype and --exp-avg-sq-dtype) on CPU
# ranks with the distributed optimizer: with fp32 moments it changes no bit; with bf16 moments the
# run stays close to the fp32 one without being it, one rank and DP=2 agree, a checkpoint resumes
# bit for bit (the moments saved as floats and read back into bf16 exactly), and --dry-run counts
# the moments at half their bytes; Megatron's refusals (the types without the flag, the flag without
# the distributed optimizer) and mgt's (fp16/fp8 moments, bf16 gradients, fp16 master weights) are
# usage errors on one line.
# Usage: bash tests/e2e/mgt_train_precision_aware_optimizer.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# parallel_training.bash's GPT-2-style model, 20 iterations, with the distributed optimizer.
BASE=("${GPT2[@]}")
FLAGS=("${BASE[@]}" --use-distributed-optimizer)
BF16=(--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16)

expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/fp32.jsonl"
# fp32 moments, Megatron's defaults under the flag: the same run bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --use-precision-aware-optimizer --main-grads-dtype fp32 \
  --main-params-dtype fp32 --metrics-file "$WORK/aware-fp32.jsonl"
compare_curves "$WORK/fp32.jsonl" "$WORK/aware-fp32.jsonl" exact

expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --metrics-file "$WORK/bf16.jsonl"
grep -q "^> precision-aware optimizer: Adam's moments kept in bf16 and bf16, updated in fp32$" "$WORK/out.txt" ||
  fail "no start-up line for the bf16 moments"
# Close to the fp32 moments' curve, and not the same curve.
python3 - "$WORK/fp32.jsonl" "$WORK/bf16.jsonl" <<'PY' || fail "bf16 moments: not close to fp32's, or no different"
import json, sys
a, b = ([j["lm_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"] for p in sys.argv[1:])
assert len(a) == len(b) >= 20 and a != b
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
assert worst <= 2e-2, worst
print(f"bf16 moments against fp32: largest relative lm loss difference {worst:.2e}")
PY
# One rank holds every moment; the ranks' sums of the gradients differ in their last bits only.
expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --metrics-file "$WORK/bf16-one.jsonl"
compare_curves "$WORK/bf16-one.jsonl" "$WORK/bf16.jsonl" same

# Saved at 10 and resumed: iterations 11-20 bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --save "$WORK/ck" --save-interval 10 --exit-interval 10
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --load "$WORK/ck" --metrics-file "$WORK/resumed.jsonl"
compare_curves "$WORK/bf16.jsonl" "$WORK/resumed.jsonl" exact
# The moments are stored as floats: fp32 moments load them too.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --load "$WORK/ck" --exit-interval 12

# The moments' bytes in the memory estimate.
moments() {
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" "$@" --dry-run --world-size 2
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["memory_per_rank_bytes"]["optimizer_state"])' "$WORK/out.txt"
}
full=$(moments) half=$(moments "${BF16[@]}") mixed=$(moments --use-precision-aware-optimizer --exp-avg-dtype bf16)
(( half * 2 == full && mixed * 4 == full * 3 )) || fail "moments' bytes: fp32 $full, bf16 $half, bf16 + fp32 $mixed"

refused() {  # refused TEXT FLAGS...: exit 2, one line, naming TEXT
  expect_status 2 "$BIN/mgt-train" "${@:2}"
  [[ $(wc -l <"$WORK/err.txt") == 1 ]] && grep -qF -- "$1" "$WORK/err.txt" || fail "${*:3}: $(cat "$WORK/err.txt")"
}
refused "--exp-avg-dtype bf16 needs --use-precision-aware-optimizer" "${FLAGS[@]}" --exp-avg-dtype bf16
refused "--use-precision-aware-optimizer needs --use-distributed-optimizer" "${BASE[@]}" "${BF16[@]}"
refused "--exp-avg-sq-dtype fp16 is not supported by mgt-train: moments stored with Transformer Engine's per-tensor scales" \
  "${FLAGS[@]}" --use-precision-aware-optimizer --exp-avg-sq-dtype fp16
refused "--main-grads-dtype bf16 is not supported by mgt-train" "${FLAGS[@]}" --use-precision-aware-optimizer \
  --main-grads-dtype bf16
refused "--main-params-dtype fp16 is not supported by mgt-train" "${FLAGS[@]}" --use-precision-aware-optimizer \
  --main-params-dtype fp16
echo "ok"
