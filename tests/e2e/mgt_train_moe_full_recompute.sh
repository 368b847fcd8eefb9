#!/usr/bin/env bash
# End-to-end check of --recompute-granularity full with Mixture-of-Experts layers: the recomputed
# forward routes the tokens again but records the auxiliary loss, the z-loss and the expert-bias
# counts once, so the lm loss, load_balancing_loss, z_loss and grad norm equal those of the run
# without recomputation bit for bit (uniform and block methods); with two expert-parallel ranks,
# whose recomputed forward exchanges the tokens again, they agree within 1e-5.
# Usage: bash tests/e2e/mgt_train_moe_full_recompute.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"

MOE=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
     --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
     --mock-data --train-iters 8 --log-interval 1 --eval-iters 0
     --position-embedding-type rope --normalization RMSNorm --swiglu
     --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0.1 --attention-dropout 0.1
     --num-experts 8 --moe-router-topk 2 --moe-router-score-function sigmoid --moe-aux-loss-coeff 1e-2
     --moe-z-loss-coeff 1e-3 --moe-router-enable-expert-bias --moe-router-bias-update-rate 0.05
     --moe-ffn-hidden-size 48 --moe-token-dispatcher-type alltoall
     --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64)

source "$SRC/tests/e2e/lib/moe_runs_agree.bash"

expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 2 --metrics-file "$WORK/uniform.jsonl"
compare "$WORK/plain.jsonl" "$WORK/uniform.jsonl" 0
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --recompute-granularity full --recompute-method block \
  --recompute-num-layers 1 --metrics-file "$WORK/block.jsonl"
compare "$WORK/plain.jsonl" "$WORK/block.jsonl" 0
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --recompute-granularity full \
  --recompute-method uniform --recompute-num-layers 1 --metrics-file "$WORK/ep2.jsonl"
compare "$WORK/plain.jsonl" "$WORK/ep2.jsonl" 1e-5
echo "ok"
