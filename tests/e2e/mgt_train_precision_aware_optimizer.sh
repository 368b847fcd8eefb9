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

MPIEXEC="$(command -v mpiexec)" || fail "no mpiexec"
LAUNCHER=()
if "$MPIEXEC" --version 2>/dev/null | grep -q HYDRA; then LAUNCHER=(-launcher fork); fi
export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1
ranks() {
  local n=$1; shift
  env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_STEP_NUM_TASKS "$MPIEXEC" -n "$n" "${LAUNCHER[@]}" "$@"
}

python3 - "$WORK/corpus.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for d in range(300):
        t, toks = (d * 7) % 120, []
        for i in range(20 + (d * 37) % 90):
            toks.append(t)
            t = (5 * t + 3 + i % 3) % 120
        f.write(json.dumps({"text": " ".join(map(str, toks))}) + "\n")
PY
"$BIN/mgt-tokenize" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/pat" --tokenizer-type NullTokenizer \
  --vocab-size 127 --append-eod --quiet >/dev/null 2>&1

BASE=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
       --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine
       --lr-warmup-iters 2 --tokenizer-type NullTokenizer --vocab-size 127 --hidden-dropout 0 --attention-dropout 0
       --data-path "$WORK/pat_text_document" --split 98,1,1 --data-cache-path "$WORK/cache"
       --train-iters 12 --log-interval 1 --eval-iters 0)
FLAGS=("${BASE[@]}" --use-distributed-optimizer)
BF16=(--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16)

# compare A B BOUND [from]: lm loss and grad norm of every logged iteration (from `from` on) within
# BOUND relative, 0 meaning bit for bit; prints the largest differences.
compare() {
  python3 - "$@" <<'PY'
import json, sys
a, b, bound = sys.argv[1], sys.argv[2], float(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 1
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train" and j["iteration"] >= first}
ra, rb = load(a), load(b)
assert sorted(ra) == sorted(rb) and len(ra) >= 6, (sorted(ra), sorted(rb))
worst = 0.0
for it in sorted(ra):
    for field in ("lm_loss", "grad_norm"):
        x, y = ra[it][field], rb[it][field]
        rel = abs(x - y) / abs(x)
        worst = max(worst, rel)
        assert (x == y) if bound == 0 else rel <= bound, f"iteration {it} {field}: {x!r} vs {y!r} ({rel:.3g})"
print(f"{b.rsplit('/', 1)[-1]} against {a.rsplit('/', 1)[-1]}: largest relative difference {worst:.2e}")
PY
}

expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/fp32.jsonl"
# fp32 moments, Megatron's defaults under the flag: the same run bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --use-precision-aware-optimizer --main-grads-dtype fp32 \
  --main-params-dtype fp32 --metrics-file "$WORK/aware-fp32.jsonl"
compare "$WORK/fp32.jsonl" "$WORK/aware-fp32.jsonl" 0

expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --metrics-file "$WORK/bf16.jsonl"
grep -q "^> precision-aware optimizer: Adam's moments kept in bf16 and bf16, updated in fp32$" "$WORK/out.txt" ||
  fail "no start-up line for the bf16 moments"
compare "$WORK/fp32.jsonl" "$WORK/bf16.jsonl" 2e-2
python3 - "$WORK/fp32.jsonl" "$WORK/bf16.jsonl" <<'PY' || fail "bf16 moments changed nothing"
import json, sys
a, b = ([j["lm_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"] for p in sys.argv[1:])
assert a != b
PY
# One rank holds every moment; the ranks' sums of the gradients differ in their last bits only.
expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --metrics-file "$WORK/bf16-one.jsonl"
compare "$WORK/bf16-one.jsonl" "$WORK/bf16.jsonl" 1e-3

# Saved at 6 and resumed: iterations 7-12 bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --save "$WORK/ck" --save-interval 6 --exit-interval 6
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" "${BF16[@]}" --load "$WORK/ck" --metrics-file "$WORK/resumed.jsonl"
compare "$WORK/bf16.jsonl" "$WORK/resumed.jsonl" 0 7
# The moments are stored as floats: fp32 moments load them too.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --load "$WORK/ck" --exit-interval 8

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
