#!/usr/bin/env bash
# End-to-end checks of mgt-ckpt-convert with Llama-shaped models: tokenize a corpus with a
# Llama 3-style tokenizer.json, train a tiny Llama (rotary, RMSNorm, SwiGLU, grouped-query
# attention, no biases, untied output), evaluate it (LAMBADA, WikiText-103) and complete prompts
# with that tokenizer, export it to Hugging Face as LlamaForCausalLM in fp32 and
# as sharded bf16, import it back and export again byte for byte; import the committed
# transformers-made Mistral; and one-line refusals with the right exit codes.
# Usage: bash tests/e2e/mgt_ckpt_convert_llama.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
one_line_error() {  # the error is one line naming $1
  [[ $(wc -l <"$work/err.txt") == 1 ]] || fail "error is not one line: $(cat "$work/err.txt")"
  grep -q -- "$1" "$work/err.txt" || fail "error does not mention '$1': $(cat "$work/err.txt")"
}

tokenizer=(--tokenizer-type HuggingFaceTokenizer --tokenizer-model "$src/datasets/tokenizer-tests/hf-llama3-bpe")
convert=("$bin/mgt-ckpt-convert" --model-type GPT)

# tokenizer file → mgt-tokenize → mgt-train → mgt-ckpt-convert --saver hf
expect_status 0 "$bin/mgt-tokenize" --input "$src/datasets/corpus-tinyshakespeare.jsonl" \
  --output-prefix "$work/shakespeare" "${tokenizer[@]}" --append-eod --workers 2
expect_status 0 "$bin/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --group-query-attention \
  --num-query-groups 2 --ffn-hidden-size 88 --seq-length 32 --max-position-embeddings 64 \
  --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu --disable-bias-linear \
  --untie-embeddings-and-output-weights --hidden-dropout 0 --attention-dropout 0 --micro-batch-size 2 --lr 1e-3 \
  --train-iters 2 --log-interval 1 --eval-iters 1 --data-path "$work/shakespeare_text_document" --split 98,1,1 \
  "${tokenizer[@]}" --save "$work/ckpt" --save-interval 2

# The trained checkpoint evaluates and generates with its tokenizer.json (taken from the checkpoint).
head -n 6 "$src/datasets/lambada_test.jsonl" >"$work/lambada.jsonl"
head -n 30 "$src/datasets/wikitext-103.wiki.test.tokens" >"$work/wiki.tokens"
expect_status 0 "$bin/mgt-eval" --task LAMBADA --valid-data "$work/lambada.jsonl" --load "$work/ckpt" \
  --micro-batch-size 4 --output "$work/lambada.json"
expect_status 0 "$bin/mgt-eval" --task WIKITEXT103 --valid-data "$work/wiki.tokens" --load "$work/ckpt" \
  --overlapping-eval 16 --micro-batch-size 4 --output "$work/wiki.json"
printf '{"prompt": "ROMEO: What light"}\n{"prompt": "Caf\\u00e9 \\u2014 \\u65e5\\u672c"}\n' >"$work/prompts.jsonl"
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 5 \
  --return-log-probs --output "$work/completions.jsonl"
python3 - "$work/lambada.json" "$work/wiki.json" "$work/completions.jsonl" <<'PY' || fail "eval or generate with HuggingFaceTokenizer"
import json, sys
lambada, wiki = (json.load(open(p)) for p in sys.argv[1:3])
for r in (lambada, wiki):
    assert r["settings"]["tokenizer"]["type"] == "HuggingFaceTokenizer", r
assert lambada["counts"]["examples"] == 6 and 0 <= lambada["counts"]["correct"] <= 6, lambada
assert lambada["target_ppl"] > 1, lambada
assert wiki["counts"]["detokenized_tokens"] > 0 and wiki["ppl"] > 1, wiki
rows = [json.loads(l) for l in open(sys.argv[3])]
assert [r["prompt"] for r in rows] == ["ROMEO: What light", "Café — 日本"], rows
for r in rows:
    assert 1 <= r["generated_tokens"] == len(r["tokens"]) == len(r["log_probs"]) <= 5, r
    assert all(0 <= t < 1024 for t in r["tokens"]) and all(lp <= 0 for lp in r["log_probs"]), r
PY

expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/hf"
python3 - "$work/out.txt" "$work/hf/config.json" <<'PY' || fail "export summary or config.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["destination"]["format"] == "hf" and s["tensors"] == 15, s  # mgt tensors: q, k, v fused
c = json.load(open(sys.argv[2]))
assert c["architectures"] == ["LlamaForCausalLM"] and c["model_type"] == "llama", c
assert (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
        c["intermediate_size"], c["head_dim"], c["max_position_embeddings"]) == (2, 32, 4, 2, 88, 8, 64), c
assert c["rope_theta"] == 500000.0 and c["rope_scaling"] is None and c["tie_word_embeddings"] is False, c
assert c["hidden_act"] == "silu" and c["attention_bias"] is False and c["torch_dtype"] == "float32", c
assert c["eos_token_id"] is not None, c
PY
[[ $(ls "$work/hf") == $'config.json\nmodel.safetensors' ]] || fail "export directory holds $(ls "$work/hf")"

# Import and export again: the same bytes; hf -> hf as well.
expect_status 0 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/hf" --save-dir "$work/back" --seq-length 32
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/back" --save-dir "$work/hf2"
cmp "$work/hf/model.safetensors" "$work/hf2/model.safetensors" || fail "re-export differs"
cmp "$work/hf/config.json" "$work/hf2/config.json" || fail "re-exported config.json differs"
expect_status 0 "${convert[@]}" --loader hf --saver hf --load-dir "$work/hf" --save-dir "$work/hf3"
cmp "$work/hf/model.safetensors" "$work/hf3/model.safetensors" || fail "hf -> hf differs"
# convert.py's llama_mistral loader is the hf import; the flags it requires are named, not refused.
expect_status 0 "${convert[@]}" --loader llama_mistral --checkpoint-type hf --model-size llama3 \
  --tokenizer-model "$src/datasets/tokenizer-tests/hf-llama3-bpe" --saver hf --load-dir "$work/hf" --save-dir "$work/hf4"
cmp "$work/hf/model.safetensors" "$work/hf4/model.safetensors" || fail "--loader llama_mistral differs from hf"
grep -q '^mgt-ckpt-convert: ignored flags (they change nothing here): --checkpoint-type hf (.*); --model-size llama3 (.*); --tokenizer-model ' \
  "$work/err.txt" || fail "llama_mistral flags not named: $(cat "$work/err.txt")"
expect_status 2 "${convert[@]}" --loader llama_mistral --checkpoint-type meta --saver hf --load-dir "$work/hf" \
  --save-dir "$work/hf5"
grep -q -- "--checkpoint-type meta is not supported by mgt-ckpt-convert: Meta's original" "$work/err.txt" ||
  fail "--checkpoint-type meta: $(cat "$work/err.txt")"

# Shared the usual way: bf16, sharded with an index.
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/bf16" \
  --hf-dtype bf16 --max-shard-size 100KB
shards=("$work"/bf16/model-0000?-of-0000?.safetensors)
[[ -f "$work/bf16/model.safetensors.index.json" && ${#shards[@]} -ge 2 && ! -e "$work/bf16/model.safetensors" ]] ||
  fail "sharded export holds $(ls "$work/bf16")"
grep -q '"torch_dtype": "bfloat16"' "$work/bf16/config.json" || fail "bf16 export does not say so"
expect_status 0 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/bf16" --save-dir "$work/bf16-back"

# The committed transformers-made Mistral (sharded) imports, and exports as Mistral again.
expect_status 0 "${convert[@]}" --loader hf --saver hf --load-dir "$src/tests/ckpt/golden/hf-mistral-tiny" \
  --save-dir "$work/mistral" --max-shard-size 80KB
grep -q '"MistralForCausalLM"' "$work/mistral/config.json" || fail "Mistral exported as another architecture"
for shard in model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors; do
  cmp "$src/tests/ckpt/golden/hf-mistral-tiny/$shard" "$work/mistral/$shard" || fail "Mistral $shard differs"
done

# Refusals: one line, exit 2 for usage, 1 for what the files say.
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" --hf-dtype fp8
one_line_error "--hf-dtype 'fp8'"
expect_status 2 "${convert[@]}" --loader mgt --saver mgt --load-dir "$work/ckpt" --save-dir "$work/x" --hf-dtype bf16
one_line_error "apply to --saver hf only"
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" \
  --max-shard-size 5XB
one_line_error "--max-shard-size '5XB'"
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" \
  --hf-model-type qwen2
one_line_error "--hf-model-type 'qwen2'"
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" --bf16
one_line_error "--hf-dtype bf16"
expect_status 1 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" \
  --hf-model-type gpt2
one_line_error "cannot be expressed as GPT-2: --position-embedding-type rope"
mkdir "$work/scaled" && cp "$work/hf/model.safetensors" "$work/scaled/"
python3 - "$work/hf/config.json" "$work/scaled/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}
json.dump(c, open(sys.argv[2], "w"))
PY
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/scaled" --save-dir "$work/x"
one_line_error "config.json: rope_scaling of type 'yarn' is not supported"
mkdir "$work/missing" && cp "$work/bf16/"* "$work/missing/" && rm "$work/missing/$(basename "${shards[1]}")"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/missing" --save-dir "$work/x"
one_line_error "$(basename "${shards[1]}"), which does not exist"
[[ ! -e "$work/x" ]] || fail "a refused conversion left $work/x"
echo "mgt-ckpt-convert Llama e2e: all checks passed"
