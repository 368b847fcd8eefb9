#!/usr/bin/env bash
# End-to-end checks of mgt-ckpt-convert with Mixtral: import the committed transformers-made
# MixtralForCausalLM and complete its prompt with mgt-generate (key/value-cached greedy decoding
# through the experts) to transformers' own greedy tokens; export it back byte for byte; train a
# tiny Mixtral-shaped mixture of experts, evaluate it (WikiText-103), generate with it, export it
# as MixtralForCausalLM, import and export again byte for byte; one-line refusals.
# Usage: bash tests/e2e/mgt_ckpt_convert_mixtral.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
one_line_error() {  # the error is one line naming $1
  [[ $(wc -l <"$work/err.txt") == 1 ]] || fail "error is not one line: $(cat "$work/err.txt")"
  grep -q -- "$1" "$work/err.txt" || fail "error does not mention '$1': $(cat "$work/err.txt")"
}
convert=("$bin/mgt-ckpt-convert" --model-type GPT)
golden=$src/tests/ckpt/golden

# The committed Mixtral: import, and its greedy completion of the reference prompt (ids through
# the NullTokenizer) is transformers'.
expect_status 0 "${convert[@]}" --loader hf --saver mgt --load-dir "$golden/hf-mixtral-tiny" --save-dir "$work/tiny"
python3 - "$golden/hf_mixtral_logits.json" "$work/prompt.jsonl" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(json.dumps({"prompt": " ".join(map(str, g["prompt"]))}) + "\n")
PY
expect_status 0 "$bin/mgt-generate" --load "$work/tiny" --tokenizer-type NullTokenizer --vocab-size 127 \
  --prompts "$work/prompt.jsonl" --max-new-tokens 8 --top-k 1 --output "$work/tiny.jsonl"
python3 - "$golden/hf_mixtral_logits.json" "$work/tiny.jsonl" <<'PY' || fail "mgt-generate differs from transformers' greedy tokens"
import json, sys
want = json.load(open(sys.argv[1]))["greedy"]
got = json.loads(open(sys.argv[2]).readline())["tokens"]
assert got == want, (got, want)
PY
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/tiny" --save-dir "$work/tiny-hf"
cmp "$golden/hf-mixtral-tiny/model.safetensors" "$work/tiny-hf/model.safetensors" || fail "Mixtral re-export differs"
# convert.py's mixtral_hf loader is the hf import; the --tokenizer-model it requires is named, not refused.
expect_status 0 "${convert[@]}" --loader mixtral_hf --tokenizer-model "$work/tokenizer.model" --saver mgt \
  --load-dir "$golden/hf-mixtral-tiny" --save-dir "$work/tiny2"
grep -q '^mgt-ckpt-convert: ignored flags (they change nothing here): --tokenizer-model ' "$work/err.txt" ||
  fail "--tokenizer-model not named: $(cat "$work/err.txt")"
expect_status 2 "${convert[@]}" --loader mgt --saver mixtral_hf --load-dir "$work/tiny" --save-dir "$work/x"
one_line_error "--saver mixtral_hf: convert.py has no saver of that name"

# A Mixtral-shaped run: every layer 4 experts, top-2, Megatron's default routing.
gpt2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$src/datasets/gpt2-vocab.json"
      --merge-file "$src/datasets/gpt2-merges.txt")
expect_status 0 "$bin/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --group-query-attention \
  --num-query-groups 2 --seq-length 32 --max-position-embeddings 64 --position-embedding-type rope \
  --normalization RMSNorm --swiglu --disable-bias-linear --untie-embeddings-and-output-weights --hidden-dropout 0 \
  --attention-dropout 0 --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 24 --moe-aux-loss-coeff 1e-2 \
  --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --train-iters 2 --log-interval 1 --eval-iters 0 \
  --mock-data "${gpt2[@]}" --save "$work/ckpt" --save-interval 2
head -n 30 "$src/datasets/wikitext-103.wiki.test.tokens" >"$work/wiki.tokens"
expect_status 0 "$bin/mgt-eval" --task WIKITEXT103 --valid-data "$work/wiki.tokens" --load "$work/ckpt" \
  --micro-batch-size 4 --output "$work/wiki.json"
printf '{"prompt": "The experts"}\n{"prompt": "A mixture of"}\n' >"$work/prompts.jsonl"
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 4 \
  --micro-batch-size 2 --return-log-probs --output "$work/completions.jsonl"
python3 - "$work/wiki.json" "$work/completions.jsonl" <<'PY' || fail "eval or generate with a mixture of experts"
import json, sys
wiki = json.load(open(sys.argv[1]))
assert wiki["ppl"] > 1, wiki
rows = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == 2, rows
for r in rows:
    assert 1 <= r["generated_tokens"] == len(r["tokens"]) == len(r["log_probs"]) <= 4, r
PY

expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/hf"
python3 - "$work/hf/config.json" <<'PY' || fail "exported config.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["architectures"] == ["MixtralForCausalLM"] and c["model_type"] == "mixtral", c
assert (c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"]) == (4, 2, 24), c
assert (c["num_hidden_layers"], c["hidden_size"], c["num_key_value_heads"]) == (2, 32, 2), c
assert c["router_aux_loss_coef"] == 0.01 and c["router_jitter_noise"] == 0.0 and c["sliding_window"] is None, c
PY
expect_status 0 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/hf" --save-dir "$work/back" --seq-length 32
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/back" --save-dir "$work/hf2"
cmp "$work/hf/model.safetensors" "$work/hf2/model.safetensors" || fail "re-export differs"
cmp "$work/hf/config.json" "$work/hf2/config.json" || fail "re-exported config.json differs"

# Refusals: one line, exit 1 for what the model or the files say.
expect_status 1 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" \
  --hf-model-type llama
one_line_error "cannot be expressed as Llama: --num-experts 4"
mkdir "$work/jitter" && cp "$work/hf/model.safetensors" "$work/jitter/"
sed 's/"router_jitter_noise": 0.0/"router_jitter_noise": 0.1/' "$work/hf/config.json" >"$work/jitter/config.json"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/jitter" --save-dir "$work/x"
one_line_error "config.json: router_jitter_noise 0.1 is not 0"
[[ ! -e "$work/x" ]] || fail "a refused conversion left $work/x"
echo "mgt-ckpt-convert Mixtral e2e: all checks passed"
