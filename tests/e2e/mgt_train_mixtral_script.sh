#!/usr/bin/env bash
# Megatron-LM's Mixtral 8x7B script (examples/mixtral/train_mixtral_8x7b_distributed.sh) as written,
# its sizes aside: every flag of its model, MoE, data, training, parallelism and logging lists is
# taken, with 8 experts of top-2 and the all-to-all dispatcher, the grouped experts, the overlapped
# gradient reduction and parameter gather, on 2 layers of hidden 64 at sequence 64, a corpus
# tokenized with the bundled Llama 2-style model for --data-path (the Shakespeare corpus five times
# over: 36,110 documents, so that the script's 0.002% test split holds one), 6 iterations of 8
# samples, and
# 4 CPU ranks (pipeline 2 x expert 2, data 2) in place of 32 GPUs (pipeline 4 x expert 8). The run
# trains to the end, logs the load-balancing loss, saves, and a second start resumes from the
# saved iteration without the optimizer and RNG state (--no-load-optim --no-load-rng).
# MGT_E2E_DEVICE=cuda runs the same on a GPU machine (the ranks sharing its GPUs).
# Usage: bash tests/e2e/mgt_train_mixtral_script.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"

TOKENIZER_MODEL="$SRC/datasets/tokenizer-tests/spm-llama-bpe.model"
for _ in 1 2 3 4 5; do cat "$SRC/datasets/corpus-tinyshakespeare.jsonl"; done > "$WORK/corpus.jsonl"
"$BIN/mgt-tokenize" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/corpus" \
  --tokenizer-type Llama2Tokenizer --tokenizer-model "$TOKENIZER_MODEL" --append-eod --quiet > /dev/null
DATA_PATH="$WORK/corpus_text_document"
CHECKPOINT_PATH="$WORK/ckpt"

SIZES=(--seq-length 64 --max-position-embeddings 512 --num-layers 2 --hidden-size 64 --ffn-hidden-size 224
       --num-attention-heads 4 --num-query-groups 2 --global-batch-size 8 --train-iters 6 --lr-decay-iters 4
       --lr-warmup-iters 1 --save-interval 3 --eval-interval 3 --eval-iters 1)
MODEL_ARGS=(--use-mcore-models --disable-bias-linear --init-method-std 0.01 --attention-dropout 0.0
            --hidden-dropout 0.0 --normalization RMSNorm --position-embedding-type rope --swiglu
            --untie-embeddings-and-output-weights --group-query-attention --no-masked-softmax-fusion
            --no-position-embedding --rotary-base 1000000)
MOE_ARGS=(--num-experts 8 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2
          --moe-grouped-gemm --moe-token-dispatcher-type alltoall --overlap-param-gather --overlap-grad-reduce)
DATA_ARGS=(--tokenizer-type Llama2Tokenizer --tokenizer-model "$TOKENIZER_MODEL" --data-path "$DATA_PATH"
           --split 99990,8,2 --data-cache-path "$WORK/cache")
TRAINING_ARGS=(--micro-batch-size 1 --lr 1e-4 --lr-decay-style cosine --min-lr 1.0e-5 --weight-decay 0.1
               --clip-grad 1.0 --bf16)
MODEL_PARALLEL_ARGS=(--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2
                     --use-distributed-optimizer --sequence-parallel)
LOGGING_ARGS=(--log-interval 1 --save "$CHECKPOINT_PATH" --load "$CHECKPOINT_PATH"
              --tensorboard-dir "$CHECKPOINT_PATH/tensorboard" --no-load-optim --no-load-rng)
RUN=("${MODEL_ARGS[@]}" "${MOE_ARGS[@]}" "${DATA_ARGS[@]}" "${TRAINING_ARGS[@]}" "${MODEL_PARALLEL_ARGS[@]}"
     "${LOGGING_ARGS[@]}" "${SIZES[@]}" --device "${MGT_E2E_DEVICE:-cpu}")

expect_status 0 ranks 4 "$BIN/mgt-train" "${RUN[@]}" --metrics-file "$WORK/run.jsonl"
[[ "$(cat "$CHECKPOINT_PATH/latest_checkpointed_iteration.txt")" == 6 ]] || fail "no checkpoint of iteration 6"
ls "$CHECKPOINT_PATH/tensorboard" | grep -q events || fail "no TensorBoard events"
python3 - "$WORK/run.jsonl" <<'PY' || fail "the script did not train"
import json, math, sys
train = [j for j in map(json.loads, open(sys.argv[1])) if j.get("event") == "train"]
assert [j["iteration"] for j in train] == list(range(1, 7)), [j["iteration"] for j in train]
assert all(math.isfinite(j["lm_loss"]) for j in train), [j["lm_loss"] for j in train]
assert all(j.get("load_balancing_loss", 0) > 0 for j in train), "no load_balancing_loss logged"
# The script's learning rate (1e-4) moves six iterations' loss little, but it must move.
assert len({j["lm_loss"] for j in train}) > 1, [j["lm_loss"] for j in train]
print(f"Mixtral 8x7B script, small: lm loss {train[0]['lm_loss']:.4f} -> {train[-1]['lm_loss']:.4f}, "
      f"load balancing loss {train[-1]['load_balancing_loss']:.4f}")
PY
# --load is --save: a second start with 3 more iterations resumes at 6 and ends at 9.

expect_status 0 ranks 4 "$BIN/mgt-train" "${RUN[@]}" --train-iters 9 --metrics-file "$WORK/resumed.jsonl"
grep -q 'successfully loaded checkpoint from .* at iteration 6$' "$WORK/out.txt" ||
  fail "the second start did not resume at iteration 6: $(grep -i checkpoint "$WORK/out.txt" | head -3)"
[[ "$(cat "$CHECKPOINT_PATH/latest_checkpointed_iteration.txt")" == 9 ]] || fail "no checkpoint of iteration 9"
echo "mgt-train with Megatron's Mixtral 8x7B script: all checks passed"
