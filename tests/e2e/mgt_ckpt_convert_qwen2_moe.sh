#!/usr/bin/env bash
# End-to-end checks of mgt-ckpt-convert with Qwen2-MoE: import the committed transformers-made
# Qwen2MoeForCausalLM and complete its prompt with mgt-generate (key/value-cached greedy decoding
# through the gated shared expert) to transformers' own greedy tokens; export it back byte for
# byte; train the imported model a few iterations on the CPU with the flags that describe it, on
# one rank and on two tensor-parallel ranks with sequence parallelism (the same losses and
# gradient norms, the shared experts' gate replicated); one-line refusals.
# Usage: bash tests/e2e/mgt_ckpt_convert_qwen2_moe.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
source "$src/tests/e2e/lib/mpi_ranks.bash"
one_line_error() {  # the error is one line naming $1
  [[ $(wc -l <"$work/err.txt") == 1 ]] || fail "error is not one line: $(cat "$work/err.txt")"
  grep -q -- "$1" "$work/err.txt" || fail "error does not mention '$1': $(cat "$work/err.txt")"
}
convert=("$bin/mgt-ckpt-convert" --model-type GPT)
golden=$src/tests/ckpt/golden

expect_status 0 "${convert[@]}" --loader hf --saver mgt --load-dir "$golden/hf-qwen2-moe-tiny" --save-dir "$work/tiny"
python3 - "$golden/hf_qwen2_moe_logits.json" "$work/prompt.jsonl" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(json.dumps({"prompt": " ".join(map(str, g["prompt"]))}) + "\n")
PY
expect_status 0 "$bin/mgt-generate" --load "$work/tiny" --tokenizer-type NullTokenizer --vocab-size 127 \
  --prompts "$work/prompt.jsonl" --max-new-tokens 8 --top-k 1 --output "$work/tiny.jsonl"
python3 - "$golden/hf_qwen2_moe_logits.json" "$work/tiny.jsonl" <<'PY' || fail "mgt-generate differs from transformers' greedy tokens"
import json, sys
want = json.load(open(sys.argv[1]))["greedy"]
got = json.loads(open(sys.argv[2]).readline())["tokens"]
assert got == want, (got, want)
PY
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/tiny" --save-dir "$work/tiny-hf"
cmp "$golden/hf-qwen2-moe-tiny/model.safetensors" "$work/tiny-hf/model.safetensors" || fail "Qwen2-MoE re-export differs"

# Training the imported model: its shape in Megatron's flags and mgt's gate flag.
qwen=(--num-layers 3 --hidden-size 32 --num-attention-heads 4 --group-query-attention --num-query-groups 2
      --ffn-hidden-size 40 --seq-length 16 --max-position-embeddings 64 --position-embedding-type rope
      --rotary-base 1000000 --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear --add-qkv-bias
      --untie-embeddings-and-output-weights --hidden-dropout 0 --attention-dropout 0
      --num-experts 4 --moe-router-topk 2 --moe-router-pre-softmax --moe-ffn-hidden-size 16 --moe-layer-freq "[1,0,1]"
      --moe-aux-loss-coeff 0.02 --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64
      --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --train-iters 4 --log-interval 1 --eval-iters 0
      --mock-data --load "$work/tiny" --finetune --moe-shared-expert-gate)
shared=(--moe-shared-expert-intermediate-size 24)
expect_status 0 "$bin/mgt-train" "${qwen[@]}" "${shared[@]}" --metrics-file "$work/tp1.jsonl"
expect_status 0 ranks 2 "$bin/mgt-train" "${qwen[@]}" "${shared[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --metrics-file "$work/tp2.jsonl"
python3 - "$work/tp1.jsonl" "$work/tp2.jsonl" <<'PY' || fail "two tensor-parallel ranks differ from one"
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
one, two = load(sys.argv[1]), load(sys.argv[2])
assert sorted(one) == sorted(two) == [1, 2, 3, 4], (sorted(one), sorted(two))
for k in one:
    for field, bound in (("lm_loss", 1e-5), ("load_balancing_loss", 1e-5), ("grad_norm", 1e-4)):
        a, b = one[k][field], two[k][field]
        assert abs(a - b) <= bound * abs(a), f"{k} {field}: {a!r} vs {b!r}"
assert one[4]["lm_loss"] < one[1]["lm_loss"], (one[1]["lm_loss"], one[4]["lm_loss"])
PY

# Refusals: one line, exit 1 for what the files say, 2 for flags.
mkdir "$work/window" && cp "$golden/hf-qwen2-moe-tiny/model.safetensors" "$work/window/"
sed 's/"use_sliding_window": false/"use_sliding_window": true/' "$golden/hf-qwen2-moe-tiny/config.json" \
  >"$work/window/config.json"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/window" --save-dir "$work/x"
one_line_error "config.json: use_sliding_window is true"
[[ ! -e "$work/x" ]] || fail "a refused conversion left $work/x"
expect_status 1 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/tiny" --save-dir "$work/x" \
  --hf-model-type mixtral
one_line_error "cannot be expressed as Mixtral"
expect_status 2 "$bin/mgt-train" "${qwen[@]}"
one_line_error "--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size"
echo "mgt-ckpt-convert Qwen2-MoE e2e: all checks passed"
