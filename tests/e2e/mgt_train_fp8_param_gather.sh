#!/usr/bin/env bash
# End-to-end checks of --fp8-param-gather on CPU ranks (the CPU backend emulates the FP8 casts):
# the distributed optimizer casts each rank's shard of the FP8 linear layers' weights and
# all-gathers the FP8 codes (train/fp8_param_gather.hpp).
#
# Bound: bit for bit against the same run without the flag, at DP=2, at DP=2 x TP=2 and with
# --overlap-param-gather. Without the flag the layers cast their whole weight once per step from
# the weights they compute with, which on the CPU backend are the fp32 weights themselves; with it
# each rank casts its shard of the same fp32 values with the same scale, and the shards' amaxes
# reduce (max) to the whole weight's: the same codes, the same amax history, so the same run. (On
# a GPU the weights computed with are bf16, and a cast of fp32 straight to FP8 can round a value
# that lies near the middle of two codes the other way than the cast of its bf16 rounding: rare
# one-code differences, and a slightly different amax.) Against the one-rank FP8 run, the
# data-parallel runs agree within 1e-3 relative, as the FP8 layouts do in mgt_train_fp8.sh (the
# gradients summed in another order shift an occasional FP8 rounding).
# Checkpoints: a run resumed at iteration 6 with the flag continues the uninterrupted run bit for
# bit, at DP=2 and on one rank (--use-distributed-optimizer with one rank gathers nothing).
# --fp8-recipe tensorwise (current scaling): the ranks' amaxes of their parts are max-reduced
# before the cast, so each rank casts with the whole weight's scale: bit for bit against the same
# run without the flag, with --overlap-param-gather (the codes gathered bucket by bucket beside
# the rest), and resumed at iteration 6 from the overlapped run's checkpoint. Every run evaluates
# at iterations 6 and 12, between steps, while the overlapped runs' gathers are still in flight.
# Small and short (hidden 32, 12 iterations) to stay quick on two cores.
# Usage: bash tests/e2e/mgt_train_fp8_param_gather.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

FP8=(--bf16 --fp8-format hybrid --fp8-amax-history-len 16 --fp8-amax-compute-algo max --use-distributed-optimizer
     --hidden-size 32 --train-iters 12 --eval-interval 6)

# same REFERENCE RUN [BOUND]: RUN's training records (at least 6) are REFERENCE's of the same
# iterations, bit for bit (loss and gradient norm), or with BOUND the losses within BOUND relative.
same() {
  python3 - "$@" <<'PY' || fail "$2 does not reproduce $1"
import json, sys
def train(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run = train(sys.argv[1]), train(sys.argv[2])
bound = float(sys.argv[3]) if len(sys.argv) > 3 else None
assert len(run) >= 6 and sorted(run) == [i for i in sorted(ref) if i >= min(run)], (sorted(ref), sorted(run))
worst = 0.0
for i in run:
    a, b = ref[i], run[i]
    rel = abs(a["lm_loss"] - b["lm_loss"]) / a["lm_loss"]
    worst = max(worst, rel)
    if bound is None:
        assert (a["lm_loss"], a["grad_norm"]) == (b["lm_loss"], b["grad_norm"]), (i, a, b)
    else:
        assert rel <= bound, (i, a["lm_loss"], b["lm_loss"], rel)
print(f"{sys.argv[2].rsplit('/', 1)[-1]} vs {sys.argv[1].rsplit('/', 1)[-1]}: iterations {min(run)}-{max(run)}, "
      f"largest relative loss difference {worst:.2e}" + (" (bit for bit)" if bound is None else f" (bound {bound})"))
PY
}

# One rank (the flag gathers nothing there) saving at iteration 6, and two data-parallel ranks
# without and with the flag.
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-param-gather --save "$WORK/ck1" --save-interval 6 \
  --metrics-file "$WORK/one.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --metrics-file "$WORK/dp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-param-gather --save "$WORK/ck" \
  --save-interval 6 --metrics-file "$WORK/dp2-pg.jsonl"
# The start-up line names what one step's all-gather moves: the 8 FP8 linear layers' weights as
# FP8 codes, the rest of the buffer in fp32.
line=$(grep -- '> --fp8-param-gather: the weights of' "$WORK/out.txt") || fail "no --fp8-param-gather line"
echo "$line"
python3 - "$line" <<'PY' || fail "the --fp8-param-gather line: $line"
import re, sys
m = re.search(r"of (\d+) FP8 linear layers \((\d+) elements\).*: (\d+) bytes per step .* instead of (\d+)", sys.argv[1])
layers, fp8, after, before = map(int, m.groups())
assert layers == 8 and fp8 == 2 * (96 * 32 + 32 * 32 + 128 * 32 + 32 * 128), (layers, fp8)
assert before - after == 3 * fp8, (before, after, fp8)
PY
same "$WORK/dp2.jsonl" "$WORK/dp2-pg.jsonl"
same "$WORK/one.jsonl" "$WORK/dp2-pg.jsonl" 1e-3
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-param-gather --overlap-grad-reduce \
  --overlap-param-gather --ddp-bucket-size 5000 --metrics-file "$WORK/dp2-pg-overlap.jsonl"
same "$WORK/dp2.jsonl" "$WORK/dp2-pg-overlap.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${LLAMA[@]}" "${FP8[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --metrics-file "$WORK/dp2tp2.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${LLAMA[@]}" "${FP8[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --fp8-param-gather --metrics-file "$WORK/dp2tp2-pg.jsonl"
same "$WORK/dp2tp2.jsonl" "$WORK/dp2tp2-pg.jsonl"

# Resumed at iteration 6: bit for bit at DP=2, and on one rank from the one-rank checkpoint.
echo 6 > "$WORK/ck/latest_checkpointed_iteration.txt"
rm -rf "$WORK/ck/iter_0000012"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-param-gather --load "$WORK/ck" \
  --metrics-file "$WORK/dp2-resumed.jsonl"
same "$WORK/dp2-pg.jsonl" "$WORK/dp2-resumed.jsonl"
echo 6 > "$WORK/ck1/latest_checkpointed_iteration.txt"
rm -rf "$WORK/ck1/iter_0000012"
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" "${FP8[@]}" --fp8-param-gather --load "$WORK/ck1" \
  --metrics-file "$WORK/one-resumed.jsonl"
same "$WORK/one.jsonl" "$WORK/one-resumed.jsonl"

# Current scaling (tensorwise) at DP=2: without the flag, with it, and with it overlapped (saving
# at iteration 6), then resumed there.
TW=("${FP8[@]}" --fp8-recipe tensorwise)
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${TW[@]}" --metrics-file "$WORK/tw-dp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${TW[@]}" --fp8-param-gather \
  --metrics-file "$WORK/tw-dp2-pg.jsonl"
grep -q -- '> --fp8-param-gather: the weights of 8 FP8 linear layers' "$WORK/out.txt" ||
  fail "tensorwise: the FP8 weights are not gathered as FP8 codes"
same "$WORK/tw-dp2.jsonl" "$WORK/tw-dp2-pg.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${TW[@]}" --fp8-param-gather --overlap-grad-reduce \
  --overlap-param-gather --ddp-bucket-size 5000 --save "$WORK/tw-ck" --save-interval 6 \
  --metrics-file "$WORK/tw-dp2-pg-overlap.jsonl"
same "$WORK/tw-dp2.jsonl" "$WORK/tw-dp2-pg-overlap.jsonl"
echo 6 > "$WORK/tw-ck/latest_checkpointed_iteration.txt"
rm -rf "$WORK/tw-ck/iter_0000012"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${TW[@]}" --fp8-param-gather --overlap-grad-reduce \
  --overlap-param-gather --ddp-bucket-size 5000 --load "$WORK/tw-ck" --metrics-file "$WORK/tw-dp2-resumed.jsonl"
same "$WORK/tw-dp2-pg-overlap.jsonl" "$WORK/tw-dp2-resumed.jsonl"
echo "PASS"
