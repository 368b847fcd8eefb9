#!/usr/bin/env bash
# End-to-end checks of mgt-ckpt-convert: train a tiny GPT on mock data, export it to Hugging Face
# GPT-2, import it back, export again and compare the files byte for byte; vocabulary truncation;
# reruns over what a killed conversion left; and clear one-line refusals with the right exit codes.
# Usage: bash tests/e2e/mgt_ckpt_convert.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
one_line_error() {  # the error is one line naming $1
  [[ $(wc -l <"$work/err.txt") == 1 ]] || fail "error is not one line: $(cat "$work/err.txt")"
  grep -q -- "$1" "$work/err.txt" || fail "error does not mention '$1': $(cat "$work/err.txt")"
}

gpt2=(--vocab-file "$src/datasets/gpt2-vocab.json" --merge-file "$src/datasets/gpt2-merges.txt")
convert=("$bin/mgt-ckpt-convert" --model-type GPT)

# A tiny model, two iterations on Megatron's mock data.
expect_status 0 "$bin/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --micro-batch-size 2 --lr 1e-3 --train-iters 2 --log-interval 1 \
  --eval-iters 1 --mock-data --tokenizer-type GPT2BPETokenizer "${gpt2[@]}" --save "$work/ckpt" --save-interval 2

expect_status 0 "${convert[@]}" --help
grep -q -- "--true-vocab-size" "$work/out.txt" || fail "--help does not list --true-vocab-size"

# Export: config.json and model.safetensors, a JSON summary on stdout.
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/hf"
python3 - "$work/out.txt" "$work/hf/config.json" <<'PY' || fail "export summary or config.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["source"]["format"] == "mgt" and s["destination"]["format"] == "hf", s
assert s["tensors"] == 28 and s["parameters"] > 0, s
assert s["vocabulary"] == {"source_rows": 50304, "true_vocab_size": None, "destination_rows": 50304}, s
c = json.load(open(sys.argv[2]))
assert c["architectures"] == ["GPT2LMHeadModel"] and c["model_type"] == "gpt2", c
assert (c["n_layer"], c["n_embd"], c["n_head"], c["n_positions"], c["n_inner"]) == (2, 32, 4, 32, 128), c
assert c["vocab_size"] == 50304 and c["eos_token_id"] == 50256 and c["activation_function"] == "gelu_new", c
PY
[[ $(ls "$work/hf") == $'config.json\nmodel.safetensors' ]] || fail "export directory holds $(ls "$work/hf")"

# Import (with the tokenizer recorded), export again: the same bytes.
expect_status 0 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/hf" --save-dir "$work/back" "${gpt2[@]}"
[[ $(cat "$work/back/latest_checkpointed_iteration.txt") == 0 ]] || fail "import is not iteration 0"
expect_status 0 "${convert[@]}" --loader core --saver hf --load-dir "$work/back" --save-dir "$work/hf2"
cmp "$work/hf/model.safetensors" "$work/hf2/model.safetensors" || fail "re-export differs"
cmp "$work/hf/config.json" "$work/hf2/config.json" || fail "re-exported config.json differs"

# convert.py's names for Megatron's own checkpoints are mgt's format, on either side: each copy
# holds the same weights.
for alias in legacy megatron mcore; do
  expect_status 0 "${convert[@]}" --loader "$alias" --saver "$alias" --load-dir "$work/ckpt" --save-dir "$work/$alias"
  expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/$alias" --save-dir "$work/hf-$alias"
  cmp "$work/hf-$alias/model.safetensors" "$work/hf/model.safetensors" || fail "--loader/--saver $alias changed the weights"
done

# mgt -> mgt is a weights-only copy that keeps the iteration.
expect_status 0 "${convert[@]}" --loader mgt --saver mgt --load-dir "$work/ckpt" --save-dir "$work/copy"
[[ -s "$work/copy/iter_0000002/mp_rank_00.h5" ]] || fail "copy lacks iteration 2"

# --true-vocab-size: truncated rows, with a warning on stderr.
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/hf50257" \
  --true-vocab-size 50257
grep -q '"vocab_size": 50257' "$work/hf50257/config.json" || fail "truncated vocab_size not written"
grep -q "warning: --true-vocab-size 50257 drops 47 rows" "$work/err.txt" || fail "truncation without warning"

# What a conversion killed mid-write leaves is no obstacle to running it again: the lock file of a
# dead process, its staging directory and tracker temporary in --save-dir, and beside a Hugging
# Face export its DIR.partial.* directory. The rerun removes them, with a warning, under the lock.
for out in "$work/killed-mgt" "$work/killed-hf"; do
  mkdir -p "$out/.iter_0000002.tmp-0123456789abcdef"
  echo "host=elsewhere pid=999999" >"$out/.mgt-writer.lock"
  echo "half a shard" >"$out/.iter_0000002.tmp-0123456789abcdef/mp_rank_00.h5"
  printf 2 >"$out/latest_checkpointed_iteration.txt.tmp.AbCdEfGhIjKl"
done
mkdir "$work/killed-hf.partial.AbCdEfGhIjKl"
echo "half a file" >"$work/killed-hf.partial.AbCdEfGhIjKl/model.safetensors"
expect_status 0 "${convert[@]}" --loader mgt --saver mgt --load-dir "$work/ckpt" --save-dir "$work/killed-mgt"
grep -q "removing '$work/killed-mgt/.iter_0000002.tmp-0123456789abcdef', left by an interrupted" "$work/err.txt" ||
  fail "the staging directory of the killed conversion was not reported: $(cat "$work/err.txt")"
[[ $(ls -A "$work/killed-mgt" | sort | tr '\n' ' ') == ".mgt-writer.lock iter_0000002 latest_checkpointed_iteration.txt " ]] ||
  fail "the rerun left $(ls -A "$work/killed-mgt")"
rm -r "$work/killed-hf/.iter_0000002.tmp-0123456789abcdef" "$work/killed-hf/latest_checkpointed_iteration.txt.tmp.AbCdEfGhIjKl"
expect_status 0 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/killed-hf"
grep -q "removing '$work/killed-hf.partial.AbCdEfGhIjKl', left by an interrupted export" "$work/err.txt" ||
  fail "the partial export of the killed conversion was not reported: $(cat "$work/err.txt")"
[[ ! -e "$work/killed-hf.partial.AbCdEfGhIjKl" ]] || fail "the partial export was not removed"
cmp "$work/hf/model.safetensors" "$work/killed-hf/model.safetensors" || fail "the rerun's export differs"

# Refusals: one line, exit 2 for usage, 1 for what the files say.
expect_status 1 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/hf"
one_line_error "is not empty"
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" \
  --target-tensor-parallel-size 2
one_line_error "apply to --saver mgt only"
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" --bogus
one_line_error "unknown flag --bogus"
expect_status 2 "${convert[@]}" --loader mgt --saver llama_mistral --load-dir "$work/ckpt" --save-dir "$work/x"
one_line_error "convert.py has no saver of that name"
expect_status 2 "${convert[@]}" --loader torch --saver hf --load-dir "$work/ckpt" --save-dir "$work/x"
one_line_error "'torch' is not a format"
expect_status 2 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/ckpt" --save-dir "$work/x" \
  --true-vocab-size 60000
one_line_error "--true-vocab-size 60000"
expect_status 2 "$bin/mgt-ckpt-convert" --model-type BERT --loader mgt --saver hf --load-dir "$work/ckpt" \
  --save-dir "$work/x"
one_line_error "GPT models only"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/ckpt" --save-dir "$work/x"
one_line_error "config.json"
cp "$work/hf/config.json" "$work/hf50257/config.json"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/hf50257" --save-dir "$work/x"
one_line_error "transformer.wte.weight"
mkdir "$work/bin" && cp "$work/hf/config.json" "$work/bin/" && echo pickle >"$work/bin/pytorch_model.bin"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/bin" --save-dir "$work/x"
one_line_error "pytorch_model.bin"
head -c 4000 "$work/hf/model.safetensors" >"$work/trunc.safetensors"
mkdir "$work/trunc" && cp "$work/hf/config.json" "$work/trunc/" && mv "$work/trunc.safetensors" "$work/trunc/model.safetensors"
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/trunc" --save-dir "$work/x"
one_line_error "out of range"
[[ ! -e "$work/x" ]] || fail "a failed conversion left $work/x"

# config.json values are judged under their own keys, and a model too large for the memory is
# refused with the estimate before any tensor is read (n_layer 10^12 used to grow without bound).
edit_config() {  # edit_config KEY VALUE: $work/edited/ holds the export with config.json's KEY changed
  rm -rf "$work/edited" && mkdir "$work/edited" && cp "$work/hf/model.safetensors" "$work/edited/"
  python3 - "$work/hf/config.json" "$work/edited/config.json" "$1" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[3]] = json.loads(sys.argv[4])
json.dump(c, open(sys.argv[2], "w"))
PY
}
edit_config n_layer 1000000000000
expect_status 1 timeout 60 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/edited" --save-dir "$work/x"
one_line_error "n_layer must be between 1 and 2147483647 (got 1000000000000)"
edit_config n_layer 100000000
expect_status 1 timeout 60 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/edited" --save-dir "$work/x"
one_line_error "^mgt-ckpt-convert: converting $work/edited needs an estimated .* parameters (weights .*), but only .* is available ("
edit_config resid_pdrop 1.5
expect_status 1 "${convert[@]}" --loader hf --saver mgt --load-dir "$work/edited" --save-dir "$work/x"
one_line_error "resid_pdrop must be in \[0, 1) (got 1.5)"
[[ ! -e "$work/x" ]] || fail "a refused conversion left $work/x"

# An architecture neither GPT-2 nor Llama can express is refused, naming the properties.
expect_status 0 "$bin/mgt-train" --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 \
  --micro-batch-size 2 --lr 1e-3 --train-iters 1 --eval-iters 0 --mock-data --tokenizer-type GPT2BPETokenizer \
  "${gpt2[@]}" --position-embedding-type rope --save "$work/rope" --save-interval 1
expect_status 1 "${convert[@]}" --loader mgt --saver hf --load-dir "$work/rope" --save-dir "$work/x"
one_line_error "--position-embedding-type rope"
one_line_error "cannot be expressed as Llama: --normalization LayerNorm"
echo "mgt-ckpt-convert e2e: all checks passed"
