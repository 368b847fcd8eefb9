#!/usr/bin/env bash
# Megatron-LM's Llama 3 8B FP8 recipe (examples/llama/train_llama3_8b_h100_fp8.sh) as written, its
# sizes aside (2 layers of hidden 64 at sequence 64, a vocabulary of 1024, 10 iterations of 8
# samples, 2 CPU ranks of data parallelism in place of 8 GPUs): every flag of its model, training, FP8, parallelism,
# distributed-optimizer, mock-data and logging lists is taken (those that only tune PyTorch are
# named as ignored), the run trains to the end with the FP8 amax histories of 1024 and the bf16
# gradient reduction, saves, and a second start resumes from the saved iteration.
# MGT_E2E_DEVICE=cuda runs the same on a GPU machine (the two ranks sharing one GPU).
# Usage: bash tests/e2e/mgt_train_llama3_fp8_script.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"

SIZES=(--num-layers 2 --hidden-size 64 --ffn-hidden-size 224 --num-attention-heads 4 --num-query-groups 2
       --kv-channels 16 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 --global-batch-size 8
       --train-samples 80 --lr-decay-samples 75 --lr-warmup-samples 16 --vocab-size 1024)
MODEL=(--use-mcore-models --group-query-attention --position-embedding-type rope --rotary-base 1000000
       --rotary-percent 1.0 --attention-dropout 0.0 --hidden-dropout 0.0 --swiglu --init-method-std 0.0134
       --attention-backend fused --apply-layernorm-1p --untie-embeddings-and-output-weights --disable-bias-linear)
TRAINING=(--lr 0.00015 --min-lr 0.00001 --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 --lr-decay-style cosine
          --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16
          --cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1
          --exit-duration-in-mins 235 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather)
FP8=(--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather)
PARALLEL=(--tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel)
DATA=(--mock-data --tokenizer-type NullTokenizer --data-cache-path "$WORK/cache"
      --tiktoken-pattern v2 --split 99,1,0 --no-create-attention-mask-in-dataloader --no-mmap-bin-files
      --num-workers 1)
LOGGING=(--log-interval 1 --eval-iters 2 --eval-interval 5 --save-interval 1000 --log-throughput --profile
         --profile-step-start 4 --profile-step-end 6 --ckpt-format torch_dist --distributed-timeout-minutes 60
         --save "$WORK/ckpt" --load "$WORK/ckpt" --tensorboard-dir "$WORK/tb")
RUN=("${SIZES[@]}" "${MODEL[@]}" "${TRAINING[@]}" "${FP8[@]}" "${PARALLEL[@]}" "${DATA[@]}" "${LOGGING[@]}" --device "${MGT_E2E_DEVICE:-cpu}")

expect_status 0 ranks 2 "$BIN/mgt-train" "${RUN[@]}" --metrics-file "$WORK/run.jsonl"
grep -q '^> the data-parallel gradient reduction runs on bf16 copies' "$WORK/out.txt" || fail "no bf16 reduction"
grep -q 'ignored flags' "$WORK/err.txt" || fail "the PyTorch-only flags were not named"
[[ "$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")" == 10 ]] || fail "no checkpoint of iteration 10"
python3 - "$WORK/run.jsonl" <<'PY' || fail "the recipe did not train"
import json, math, sys
train = [j for j in map(json.loads, open(sys.argv[1])) if j.get("event") == "train"]
assert [j["iteration"] for j in train] == list(range(1, 11)), [j["iteration"] for j in train]
assert all(math.isfinite(j["lm_loss"]) for j in train), [j["lm_loss"] for j in train]
assert train[-1]["lm_loss"] < train[0]["lm_loss"], (train[0]["lm_loss"], train[-1]["lm_loss"])
print(f"Llama 3 8B FP8 recipe, small: lm loss {train[0]['lm_loss']:.4f} -> {train[-1]['lm_loss']:.4f}")
PY
# The script's --load is its --save: a second start resumes at iteration 10, with nothing left to do.
expect_status 0 ranks 2 "$BIN/mgt-train" "${RUN[@]}" --metrics-file "$WORK/resumed.jsonl"
grep -q 'successfully loaded checkpoint from .* at iteration 10$' "$WORK/out.txt" ||
  fail "the second start did not resume at iteration 10: $(grep -i checkpoint "$WORK/out.txt" | head -3)"
echo "mgt-train with Megatron's Llama 3 8B FP8 recipe: all checks passed"
