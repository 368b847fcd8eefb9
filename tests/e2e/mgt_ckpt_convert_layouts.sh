#!/usr/bin/env bash
# End-to-end checks of mgt-ckpt-convert between parallel layouts (mpiexec, CPU backend), optimizer
# state included: a TP=2 checkpoint converted to TP=4 and back is the same checkpoint (resumed at
# TP=2 it continues the uninterrupted run bit for bit); converted to TP=1 x PP=2 it continues the
# one-rank loss curve on two pipeline stages; a DP=2 distributed-optimizer checkpoint converted to
# one rank without it continues the curve on one rank, and one converted to DP=2 with it on two;
# TP=4 to TP=1 exports to Hugging Face the same bytes as the TP=2 source, and that export imported
# into TP=2 x PP=2 exports the same bytes again; progress and a GB/s
# rate are printed; a target that does not fit the model is refused in one line.
# Usage: bash tests/e2e/mgt_ckpt_convert_layouts.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

CONVERT=("$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt)
# keep_iteration SAVE COPY N: COPY holds SAVE's iteration N alone, the tracker naming it.
keep_iteration() {
  local name
  name=$(printf 'iter_%07d' "$3")
  mkdir "$2"
  cp -r "$1/$name" "$2/"
  echo "$3" >"$2/latest_checkpointed_iteration.txt"
}
files_of() { ls "$1/iter_0000010" | tr '\n' ' '; }

# The Llama style (SwiGLU's two-chunk fc1, the per-group fused QKV, untied output layer) with four
# query groups, so that four tensor-parallel ranks divide them.
MODEL=()
previous=""
for flag in "${LLAMA[@]}"; do
  [[ "$previous" == --num-query-groups ]] && flag=4
  MODEL+=("$flag")
  previous="$flag"
done
LLAMA=("${MODEL[@]}")

# The references: one rank, and TP=2 saving at 10 and 20.
expect_status 0 "$BIN/mgt-train" "${LLAMA[@]}" --metrics-file "$WORK/one.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --tensor-model-parallel-size 2 --save "$WORK/tp2" \
  --save-interval 10 --metrics-file "$WORK/tp2.jsonl"
keep_iteration "$WORK/tp2" "$WORK/tp2-at-10" 10

# TP=2 -> TP=4 -> TP=2: the same checkpoint; resumed at TP=2, the uninterrupted run bit for bit.
expect_status 0 "${CONVERT[@]}" --load-dir "$WORK/tp2-at-10" --save-dir "$WORK/tp4" --target-tensor-parallel-size 4
[[ "$(files_of "$WORK/tp4")" == "mp_rank_00.h5 mp_rank_01.h5 mp_rank_02.h5 mp_rank_03.h5 " ]] ||
  fail "TP=4: files $(files_of "$WORK/tp4")"
grep -q 'Processed .* tensors' "$WORK/err.txt" || fail "no progress line: $(cat "$WORK/err.txt")"
grep -q 'GB/s)' "$WORK/err.txt" || fail "no throughput line: $(cat "$WORK/err.txt")"
python3 - "$WORK/out.txt" <<'PY' || fail "TP=4 summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["source_layout"]["tensor_model_parallel_size"] == 2, s
assert s["target_layout"]["tensor_model_parallel_size"] == 4 and s["optimizer_state"] is True, s
assert s["bytes"] > 0 and s["gb_per_second"] > 0, s
PY
expect_status 0 "${CONVERT[@]}" --load-dir "$WORK/tp4" --save-dir "$WORK/back-to-tp2" --target-tensor-parallel-size 2
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --tensor-model-parallel-size 2 --load "$WORK/back-to-tp2" \
  --metrics-file "$WORK/round-trip.jsonl"
compare_curves "$WORK/tp2.jsonl" "$WORK/round-trip.jsonl" exact

# TP=4 -> TP=1 exports the same Hugging Face bytes as the TP=2 source.
expect_status 0 "${CONVERT[@]}" --load-dir "$WORK/tp4" --save-dir "$WORK/tp1" --target-tensor-parallel-size 1
[[ "$(files_of "$WORK/tp1")" == "mp_rank_00.h5 " ]] || fail "TP=1: files $(files_of "$WORK/tp1")"
for c in tp1 tp2-at-10; do
  expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$WORK/$c" \
    --save-dir "$WORK/hf-$c"
done
cmp "$WORK/hf-tp1/model.safetensors" "$WORK/hf-tp2-at-10/model.safetensors" || fail "TP=1 export differs from TP=2's"
# And imported from Hugging Face straight into TP=2 x PP=2.
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader hf --saver mgt --load-dir "$WORK/hf-tp1" \
  --save-dir "$WORK/hf-tp2-pp2" --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2 --seq-length 64
[[ "$(ls "$WORK/hf-tp2-pp2/iter_0000000" | tr '\n' ' ')" == "mp_rank_00_000.h5 mp_rank_00_001.h5 mp_rank_01_000.h5 mp_rank_01_001.h5 " ]] ||
  fail "HF to TP=2 x PP=2: files"
# Exported again from TP=2 x PP=2: the same bytes, so the import split every tensor right.
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$WORK/hf-tp2-pp2" \
  --save-dir "$WORK/hf-again"
cmp "$WORK/hf-tp1/model.safetensors" "$WORK/hf-again/model.safetensors" || fail "HF -> TP=2 x PP=2 -> HF differs"

# TP=2 -> TP=1 x PP=2: the one-rank curve continues on two pipeline stages.
expect_status 0 "${CONVERT[@]}" --load-dir "$WORK/tp2-at-10" --save-dir "$WORK/pp2" --target-tensor-parallel-size 1 \
  --target-pipeline-parallel-size 2
[[ "$(files_of "$WORK/pp2")" == "mp_rank_00_000.h5 mp_rank_00_001.h5 " ]] || fail "PP=2: files $(files_of "$WORK/pp2")"
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --pipeline-model-parallel-size 2 --load "$WORK/pp2" \
  --metrics-file "$WORK/pp2.jsonl"
compare_curves "$WORK/one.jsonl" "$WORK/pp2.jsonl" continues

# The distributed optimizer: a DP=2 checkpoint with one optimizer shard per data-parallel rank,
# converted to one rank without it, continues on one rank; converted back to DP=2 with it, on two.
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --use-distributed-optimizer --save "$WORK/dp2" \
  --save-interval 10 --exit-interval 10
[[ "$(files_of "$WORK/dp2")" == "mp_rank_00.h5 mp_rank_00_dp_000.h5 mp_rank_00_dp_001.h5 " ]] ||
  fail "DP=2: files $(files_of "$WORK/dp2")"
expect_status 0 "${CONVERT[@]}" --load-dir "$WORK/dp2" --save-dir "$WORK/dp1" --target-data-parallel-size 1 \
  --target-no-distributed-optimizer
[[ "$(files_of "$WORK/dp1")" == "mp_rank_00.h5 " ]] || fail "DP=1: files $(files_of "$WORK/dp1")"
expect_status 0 "$BIN/mgt-train" "${LLAMA[@]}" --load "$WORK/dp1" --metrics-file "$WORK/dp1.jsonl"
compare_curves "$WORK/one.jsonl" "$WORK/dp1.jsonl" continues
expect_status 0 "${CONVERT[@]}" --load-dir "$WORK/dp1" --save-dir "$WORK/dp2-again" --target-data-parallel-size 2 \
  --target-use-distributed-optimizer
[[ "$(files_of "$WORK/dp2-again")" == "mp_rank_00.h5 mp_rank_00_dp_000.h5 mp_rank_00_dp_001.h5 " ]] ||
  fail "DP=2 again: files $(files_of "$WORK/dp2-again")"
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --use-distributed-optimizer --load "$WORK/dp2-again" \
  --metrics-file "$WORK/dp2-again.jsonl"
compare_curves "$WORK/one.jsonl" "$WORK/dp2-again.jsonl" continues

# Refusals, in one line: 4 query groups do not split over 8 tensor-parallel ranks.
expect_status 2 "${CONVERT[@]}" --load-dir "$WORK/tp2-at-10" --save-dir "$WORK/x" --target-tensor-parallel-size 8
[[ $(wc -l <"$WORK/err.txt") == 1 ]] || fail "error is not one line: $(cat "$WORK/err.txt")"
grep -q -- "--target-tensor-parallel-size 8" "$WORK/err.txt" || fail "error does not name the flag: $(cat "$WORK/err.txt")"
[[ ! -e "$WORK/x" ]] || fail "a refused conversion left $WORK/x"
echo "mgt-ckpt-convert layouts: all checks passed"
