#!/usr/bin/env bash
# Megatron-LM's Qwen3-30B-A3B configuration (examples/post_training/modelopt/conf/qwen/Qwen3-30B-A3B.sh,
# core_v0.13.0) as written, its sizes aside: every flag of its MODEL_ARGS (the query and key norms of
# --qk-layernorm, 128 experts of top-8 made 8 of top-2, fp32 routing, the all-to-all dispatcher,
# the deprecated --moe-layer-recompute, sequence parallelism) on 2 layers of hidden 64 at sequence
# 32 with the bundled Qwen2-style tokenizer.json for --tokenizer-model and mock data; 4 CPU ranks
# (tensor 2 x expert 2 x data 2) train 4 iterations and save. mgt-ckpt-convert exports the
# checkpoint as Hugging Face's Qwen3MoeForCausalLM, and mgt-generate completes a prompt from the
# checkpoint and from the export read back, with the same tokens.
# MGT_E2E_DEVICE=cuda runs the same on a GPU machine (the ranks sharing its GPUs).
# Usage: bash tests/e2e/mgt_train_qwen3_moe_config.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"

TOKENIZER_MODEL="$SRC/datasets/tokenizer-tests/hf-qwen2-bpe"
# MODEL_ARGS as Megatron's file has them, the sizes replaced by those below.
MODEL_ARGS=(--save-interval 4 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion --disable-bias-linear
            --untie-embeddings-and-output-weights --position-embedding-type rope --no-rope-fusion
            --normalization RMSNorm --swiglu --group-query-attention --qk-layernorm --moe-router-dtype fp32
            --moe-token-dispatcher-type alltoall --moe-router-load-balancing-type aux_loss --moe-layer-recompute
            --tokenizer-type HuggingFaceTokenizer --use-mcore-models --rotary-percent 1.0 --rotary-base 1000000
            --no-bias-swiglu-fusion --sequence-parallel)
SIZES=(--num-layers 2 --hidden-size 64 --ffn-hidden-size 96 --num-attention-heads 4 --num-query-groups 2
       --kv-channels 32 --num-experts 8 --moe-ffn-hidden-size 32 --moe-router-topk 2 --moe-aux-loss-coeff 1e-3
       --seq-length 32 --max-position-embeddings 64 --make-vocab-size-divisible-by 8)
RUN=("${MODEL_ARGS[@]}" "${SIZES[@]}" --tokenizer-model "$TOKENIZER_MODEL" --mock-data --global-batch-size 4
     --train-iters 4 --lr 1e-3 --log-interval 1 --eval-iters 0 --tensor-model-parallel-size 2
     --expert-model-parallel-size 2 --save "$WORK/ckpt" --device "${MGT_E2E_DEVICE:-cpu}")

expect_status 0 ranks 4 "$BIN/mgt-train" "${RUN[@]}" --metrics-file "$WORK/run.jsonl"
[[ "$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")" == 4 ]] || fail "no checkpoint of iteration 4"
python3 - "$WORK/run.jsonl" <<'PY' || fail "the configuration did not train"
import json, math, sys
train = [j for j in map(json.loads, open(sys.argv[1])) if j.get("event") == "train"]
assert [j["iteration"] for j in train] == [1, 2, 3, 4], [j["iteration"] for j in train]
assert all(math.isfinite(j["lm_loss"]) and j.get("load_balancing_loss", 0) > 0 for j in train), train
assert train[-1]["lm_loss"] < train[0]["lm_loss"], [j["lm_loss"] for j in train]
print(f"Qwen3-30B-A3B configuration, small: lm loss {train[0]['lm_loss']:.4f} -> {train[-1]['lm_loss']:.4f}")
PY

# The export is Qwen3-MoE's (query and key norms, experts without a shared one), read back the same.
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$WORK/ckpt" \
  --save-dir "$WORK/hf"
grep -q '"model_type": "qwen3_moe"' "$WORK/hf/config.json" || fail "not exported as qwen3_moe"
grep -q '"norm_topk_prob": true' "$WORK/hf/config.json" || fail "Megatron's default routing is norm_topk_prob"
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader hf --saver mgt --load-dir "$WORK/hf" \
  --save-dir "$WORK/back"
printf '{"prompt": "To be, or not to be"}\n' > "$WORK/prompt.jsonl"
for c in ckpt back; do
  expect_status 0 "$BIN/mgt-generate" --load "$WORK/$c" --prompts "$WORK/prompt.jsonl" --max-new-tokens 6 \
    --top-k 1 --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$TOKENIZER_MODEL" \
    --output "$WORK/generate-$c.jsonl"
done
python3 - "$WORK/generate-ckpt.jsonl" "$WORK/generate-back.jsonl" <<'PY' || fail "the export completes differently"
import json, sys
a, b = (json.loads(open(p).readline())["tokens"] for p in sys.argv[1:3])
assert a == b and len(a) == 6, (a, b)
PY
echo "Megatron's Qwen3-30B-A3B configuration: all checks passed"
