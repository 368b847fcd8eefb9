#!/usr/bin/env bash
# End-to-end checks of FP8 training on CPU ranks (the CPU backend emulates the FP8 casts): the
# flags' checks as Megatron's; a GPT-2-style and a Llama-style model trained with --fp8-format
# hybrid (delayed scaling, a history of 16, max) and e4m3 tensorwise stay close to their bf16
# curves and learn; tensor parallelism (with sequence parallelism, and without it, where the norms
# cast linear_qkv's and linear_fc1's inputs themselves as on one rank) and pipeline parallelism
# reproduce the one-rank FP8 run, the amaxes being reduced over the tensor-parallel ranks.
# Usage: bash tests/e2e/mgt_train_fp8.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

FP8=(--bf16 --fp8-format hybrid --fp8-amax-history-len 16 --fp8-amax-compute-algo max)

# Megatron's checks.
expect_status 2 "$BIN/mgt-train" "${GPT2[@]}" --fp8-format hybrid
grep -q -- '--fp8-format needs --bf16 or --fp16' "$WORK/err.txt" || fail "fp8 without bf16: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-recipe mxfp8
grep -q 'Blackwell' "$WORK/err.txt" || fail "mxfp8: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-param-gather
grep -q -- '--fp8-param-gather needs --use-distributed-optimizer' "$WORK/err.txt" || fail "param gather: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --first-last-layers-bf16 --num-layers-at-start-in-bf16 2 \
  --num-layers-at-end-in-bf16 1
grep -q 'exceed --num-layers (2)' "$WORK/err.txt" || fail "bf16 layers: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-eval" --fp8-format hybrid
grep -q 'FP8 is a training recipe of mgt-train' "$WORK/err.txt" || fail "mgt-eval fp8: $(cat "$WORK/err.txt")"

# close REFERENCE RUN BOUND: every training loss of RUN within BOUND relative of REFERENCE's, and
# the last one below the first (it learns).
close() {
  python3 - "$@" <<'PY' || fail "$2 is not close to $1"
import json, sys
def train(path):
    return {j["iteration"]: j["lm_loss"] for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run, bound = train(sys.argv[1]), train(sys.argv[2]), float(sys.argv[3])
assert sorted(ref) == sorted(run) and len(run) >= 20, (sorted(ref), sorted(run))
worst = max(abs(run[i] - ref[i]) / ref[i] for i in run)
assert worst <= bound, f"largest relative difference {worst:.3g} > {bound}"
assert run[max(run)] < 0.8 * run[min(run)], f"no learning: {run[min(run)]} -> {run[max(run)]}"
print(f"{sys.argv[2].rsplit('/', 1)[-1]} vs {sys.argv[1].rsplit('/', 1)[-1]}: largest relative difference {worst:.2e}")
PY
}

for model in GPT2 LLAMA; do
  declare -n FLAGS="$model"
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --bf16 --metrics-file "$WORK/$model-bf16.jsonl"
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" "${FP8[@]}" --metrics-file "$WORK/$model-fp8.jsonl"
  close "$WORK/$model-bf16.jsonl" "$WORK/$model-fp8.jsonl" 0.03
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --bf16 --fp8-format e4m3 --fp8-recipe tensorwise \
    --metrics-file "$WORK/$model-fp8-tensorwise.jsonl"
  close "$WORK/$model-bf16.jsonl" "$WORK/$model-fp8-tensorwise.jsonl" 0.03
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${FP8[@]}" --tensor-model-parallel-size 2 \
    --sequence-parallel --metrics-file "$WORK/$model-fp8-tp2.jsonl"
  close "$WORK/$model-fp8.jsonl" "$WORK/$model-fp8-tp2.jsonl" 1e-3
  # The norms cast their outputs for linear_qkv and linear_fc1 themselves by default, with the
  # same codes as the layers' own casts (--no-fp8-norm-casts): bit for bit on one rank, and on
  # tensor-parallel ranks without sequence parallelism as close as the layouts are.
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" "${FP8[@]}" --no-fp8-norm-casts \
    --metrics-file "$WORK/$model-fp8-separate-casts.jsonl"
  compare_curves "$WORK/$model-fp8.jsonl" "$WORK/$model-fp8-separate-casts.jsonl" exact
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${FP8[@]}" --tensor-model-parallel-size 2 \
    --metrics-file "$WORK/$model-fp8-tp2-norm-casts.jsonl"
  close "$WORK/$model-fp8.jsonl" "$WORK/$model-fp8-tp2-norm-casts.jsonl" 1e-3
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${FP8[@]}" --pipeline-model-parallel-size 2 \
    --metrics-file "$WORK/$model-fp8-pp2.jsonl"
  close "$WORK/$model-fp8.jsonl" "$WORK/$model-fp8-pp2.jsonl" 1e-3
done
# The amax histories and scales are part of the checkpoint: a run resumed at iteration 10
# continues the uninterrupted run bit for bit (the CPU's kernels are deterministic), also on two
# tensor-parallel ranks within the layouts' bound; a bf16 checkpoint starts FP8 from scale 1.
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --save "$WORK/ck" --save-interval 10 \
  --metrics-file "$WORK/full.jsonl"
echo 10 > "$WORK/ck/latest_checkpointed_iteration.txt"
rm -rf "$WORK/ck/iter_0000020"
cp -r "$WORK/ck" "$WORK/ck-tp"
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --load "$WORK/ck" --metrics-file "$WORK/resumed.jsonl"
compare_curves "$WORK/full.jsonl" "$WORK/resumed.jsonl" exact
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --tensor-model-parallel-size 2 --load "$WORK/ck-tp" \
  --metrics-file "$WORK/resumed-tp2.jsonl"
python3 - "$WORK/full.jsonl" "$WORK/resumed-tp2.jsonl" <<'PY' || fail "TP=2 does not continue the FP8 run"
import json, sys
a, b = ({j["iteration"]: j["lm_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"} for p in sys.argv[1:])
assert sorted(b) == list(range(11, 21)), sorted(b)
assert all(abs(a[i] - b[i]) <= 1e-3 * a[i] for i in b), [(a[i], b[i]) for i in b]
PY
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" --bf16 --exit-interval 10 --save "$WORK/ck-bf16" --save-interval 10
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --load "$WORK/ck-bf16"
grep -q 'holds no FP8 state for 8 FP8 linear layers: their scales start at 1' "$WORK/err.txt" "$WORK/out.txt" ||
  fail "no note on a checkpoint without FP8 state"
echo "mgt_train_fp8: ok"
