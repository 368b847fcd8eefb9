#!/usr/bin/env bash
# End-to-end checks of the Megatron flags that change results, together, across ranks (mpiexec,
# CPU backend): --rampup-batch-size, --calculate-per-token-loss, --decoupled-lr,
# --apply-layernorm-1p, --log-params-norm and --log-num-zeros-in-grad. Data parallelism (DP=2,
# plain and with the distributed optimizer) reproduces the one-rank run (losses, gradient and
# parameter norms, zeros counted, batch sizes, consumed samples); a DP=2 run stopped mid-ramp
# resumes bit for bit; bad values are one-line usage errors (exit 2).
# Usage: bash tests/e2e/mgt_train_ported_flags.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# Global batch 8 reached from 4 after 32 samples: 8 iterations of 4, one of 8 at sample 32, then
# (176 - 40) / 8 = 17 more: 26 iterations. --eod-mask-loss gives the micro-batches different
# token counts, which --calculate-per-token-loss weighs.
FLAGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
       --micro-batch-size 2 --global-batch-size 8 --rampup-batch-size 4 4 32 --train-samples 176
       --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-samples 16 --decoupled-lr 1e-2
       --decoupled-min-lr 1e-3 --calculate-per-token-loss --apply-layernorm-1p --eod-mask-loss
       --log-params-norm --log-num-zeros-in-grad
       --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64
       --data-path "$WORK/pat_text_document" --split 90,5,5 --data-cache-path "$WORK/cache"
       --log-interval 1 --eval-interval 10 --eval-iters 2)

expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/one.jsonl"
[[ "$(grep -c '] iteration ' "$WORK/out.txt")" == 26 ]] || fail "not 26 iterations"
grep -q '| global batch size:     4 |' "$WORK/out.txt" || fail "no batch size 4 in the log"
grep -q '^ramping up batch size from 4 to 8$' "$WORK/out.txt" || fail "no ramp-up line"
grep -q '| decoupled learning rate: [0-9]\.[0-9]\{6\}E-[0-9]\{2\} |' "$WORK/out.txt" || fail "no decoupled learning rate"
grep -q '| num zeros: [0-9]*\.0 | params norm: [0-9]*\.[0-9]\{3\} |' "$WORK/out.txt" || fail "no num zeros / params norm"

# compare_statistics REFERENCE RUN: the same batch sizes, parameter norms (1e-5 relative) and
# zeros counted, iteration by iteration; a sum in another order may cancel exactly in one run
# and not the other, so the zeros may differ by an element or two.
compare_statistics() {
  python3 - "$@" <<'PY' || fail "$2: statistics differ from $1"
import json, sys
def trains(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run = trains(sys.argv[1]), trains(sys.argv[2])
assert sorted(ref) == sorted(run)
for i in sorted(ref):
    a, b = ref[i], run[i]
    assert a["global_batch_size"] == b["global_batch_size"], (i, a["global_batch_size"], b["global_batch_size"])
    assert abs(a["params_norm"] - b["params_norm"]) <= 1e-5 * a["params_norm"], (i, a["params_norm"], b["params_norm"])
    assert abs(a["num_zeros"] - b["num_zeros"]) <= 2, (i, a["num_zeros"], b["num_zeros"])
    assert a["decoupled_learning_rate"] == b["decoupled_learning_rate"], i
PY
}

for optimizer in plain distributed; do
  extra=()
  [[ $optimizer == distributed ]] && extra=(--use-distributed-optimizer)
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${extra[@]}" --metrics-file "$WORK/dp2-$optimizer.jsonl"
  compare_curves "$WORK/one.jsonl" "$WORK/dp2-$optimizer.jsonl" same
  compare_statistics "$WORK/one.jsonl" "$WORK/dp2-$optimizer.jsonl"
done

# Stopped at iteration 6 (mid-ramp) and resumed on DP=2: the curve continues bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --save "$WORK/ckpt" --save-interval 100 \
  --exit-interval 6 --metrics-file "$WORK/first.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --save "$WORK/ckpt" --save-interval 100 --load "$WORK/ckpt" \
  --metrics-file "$WORK/second.jsonl"
compare_curves "$WORK/dp2-plain.jsonl" "$WORK/second.jsonl" exact
# As Megatron's train(), a checkpoint where the batch size grows (4 -> 8 after 32 samples: before
# iteration 9).
[[ -d "$WORK/ckpt/iter_0000008" ]] || fail "no checkpoint where the ramp-up changed the batch size: $(ls "$WORK/ckpt")"

# A batch size the ramp-up reaches that DP=2 x micro-batch 2 does not divide, and a bad rate:
# one-line usage errors naming the flag.
BASE=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
      --micro-batch-size 2 --train-samples 176 --lr 3e-3 --tokenizer-type NullTokenizer --vocab-size 127
      --data-path "$WORK/pat_text_document" --split 90,5,5 --data-cache-path "$WORK/cache")
expect_status 2 ranks 2 "$BIN/mgt-train" "${BASE[@]}" --global-batch-size 12 --rampup-batch-size 2 2 32
grep -q -- '--rampup-batch-size: the global batch size 2 that the ramp-up reaches is not divisible' "$WORK/err.txt" ||
  fail "the usage error does not name --rampup-batch-size"
expect_status 2 "$BIN/mgt-train" "${BASE[@]}" --global-batch-size 8 --decoupled-lr=-1
grep -q -- '--decoupled-lr must be at least 0, got -1' "$WORK/err.txt" || fail "no --decoupled-lr usage error"
# Megatron's profiling flags: --profile, --profile-ranks and the step window taken (mgt's own
# profile: on the CPU, host time per operation), the PyTorch profiler named as ignored, an empty
# window refused.
expect_status 0 "$BIN/mgt-train" "${BASE[@]}" --global-batch-size 8 --profile --profile-ranks 0 \
  --profile-step-start 2 --profile-step-end 3 --use-pytorch-profiler
grep -q -- "--profile: host time per operation of iteration 3," "$WORK/out.txt" ||
  fail "no line naming the profiled iterations"
grep -q "^CPU time per operation (--profile)" "$WORK/err.txt" || fail "no per-operation table"
grep -q -- "--profile-step-start" "$WORK/err.txt" && fail "the step window is named as ignored"
grep -q -- "--use-pytorch-profiler" "$WORK/err.txt" || fail "the ignored-flags line does not name --use-pytorch-profiler"
expect_status 2 "$BIN/mgt-train" "${BASE[@]}" --global-batch-size 8 --profile --profile-step-start 5 --profile-step-end 5
grep -q -- '--profile-step-end (5) must be greater than --profile-step-start (5)' "$WORK/err.txt" ||
  fail "no usage error for an empty profile window"
expect_status 2 "$BIN/mgt-train" "${BASE[@]}" --global-batch-size 8 --profile --profile-ranks=-1
grep -q -- '--profile-ranks must be at least 0, got -1' "$WORK/err.txt" || fail "no --profile-ranks usage error"
echo "mgt_train_ported_flags: ok"
