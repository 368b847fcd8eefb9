#!/usr/bin/env bash
# End-to-end checks of --moe-input-jitter-eps (CPU ranks over MPI): the router's noise changes the
# run, repeats exactly from the seed, and is the same under tensor parallelism with sequence
# parallelism and under expert parallelism, which reproduce the one-rank run within 1e-5.
# Usage: bash tests/e2e/mgt_train_moe_input_jitter.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"

MOE=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
     --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
     --mock-data --train-iters 8 --log-interval 1 --eval-iters 0
     --position-embedding-type rope --normalization RMSNorm --swiglu
     --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0 --attention-dropout 0
     --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3
     --moe-ffn-hidden-size 48 --moe-token-dispatcher-type alltoall
     --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64)
JITTER=(--moe-input-jitter-eps 0.2)

source "$SRC/tests/e2e/lib/moe_runs_agree.bash"

expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${JITTER[@]}" --metrics-file "$WORK/one.jsonl"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${JITTER[@]}" --metrics-file "$WORK/again.jsonl"
compare "$WORK/one.jsonl" "$WORK/again.jsonl" 0
# The noise moves the logits from the first iteration on (the z-loss reads them).
python3 - "$WORK/plain.jsonl" "$WORK/one.jsonl" <<'PY' || fail "the jitter did not change the run"
import json, sys
runs = [[j["z_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"] for p in sys.argv[1:]]
assert runs[0][0] != runs[1][0], runs
PY

expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${JITTER[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --metrics-file "$WORK/tp2sp.jsonl"
compare "$WORK/one.jsonl" "$WORK/tp2sp.jsonl" 1e-5
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${JITTER[@]}" --expert-model-parallel-size 2 \
  --metrics-file "$WORK/ep2.jsonl"
compare "$WORK/one.jsonl" "$WORK/ep2.jsonl" 1e-5
echo "ok"
