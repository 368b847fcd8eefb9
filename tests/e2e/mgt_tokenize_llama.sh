#!/usr/bin/env bash
# End-to-end checks of mgt-tokenize with the Llama-family tokenizers: a small JSONL of the golden
# texts (tests/tokenizer/golden/) tokenized with HuggingFaceTokenizer, Llama2Tokenizer and
# TikTokenizer gives exactly the golden ids (plus the eos id with --append-eod) in the .bin, and
# the .idx document sizes; bad flag combinations are usage errors.
# Usage: bash tests/e2e/mgt_tokenize_llama.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1/mgt-tokenize"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

MODELS="$SRC/datasets/tokenizer-tests"
GOLDEN="$SRC/tests/tokenizer/golden"

# The golden texts as a JSONL corpus, and the ids each document should get (eod appended to
# non-empty documents, as preprocess_data.py does), as a little-endian uint16 stream.
make_expected() {  # GOLDEN_FILE OUT_PREFIX
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
header = json.loads(lines[0])
with open(sys.argv[2] + ".jsonl", "w", encoding="utf-8") as corpus, open(sys.argv[2] + ".bin", "wb") as ids:
    for line in lines[1:]:
        case = json.loads(line)
        corpus.write(json.dumps({"text": case["text"]}, ensure_ascii=False) + "\n")
        doc = case["ids"] + ([header["eod"]] if case["ids"] else [])
        ids.write(struct.pack("<%dH" % len(doc), *doc))
PY
}

check() {  # NAME GOLDEN_FILE TOKENIZER_FLAGS...
  local name=$1 golden=$2; shift 2
  make_expected "$GOLDEN/$golden" "$WORK/$name-expected"
  expect_status 0 "$BIN" --input "$WORK/$name-expected.jsonl" --output-prefix "$WORK/$name" "$@" \
    --append-eod --workers 2
  cmp -s "$WORK/${name}_text_document.bin" "$WORK/$name-expected.bin" ||
    fail "$name: the .bin does not hold the golden ids"
  grep -q '"documents": ' "$WORK/out.txt" || fail "$name: no summary"
}

check hf-llama3 hf-llama3-bpe.jsonl --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$MODELS/hf-llama3-bpe"
check hf-gpt2 hf-gpt2-bpe.jsonl --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$MODELS/hf-gpt2-bpe/tokenizer.json"
check hf-qwen2 hf-qwen2-bpe.jsonl --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$MODELS/hf-qwen2-bpe"
check hf-llama2 hf-llama2-bpe.jsonl --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$MODELS/hf-llama2-bpe"
check llama2 spm-llama-bpe-llama2.jsonl --tokenizer-type Llama2Tokenizer --tokenizer-model "$MODELS/spm-llama-bpe.model"
check tiktoken tiktoken-v2.jsonl --tokenizer-type TikTokenizer --tokenizer-model "$MODELS/tiktoken-bpe.json" \
  --tiktoken-pattern v2 --vocab-size 709 --tiktoken-num-special-tokens 12 \
  --tiktoken-special-tokens "<unk>" "<s>" "</s>" "<|im_start|>"

# The same corpus twice through one run with several workers: identical documents.
expect_status 0 "$BIN" --input "$WORK/hf-llama3-expected.jsonl" "$WORK/hf-llama3-expected.jsonl" \
  --output-prefix "$WORK/twice" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$MODELS/hf-llama3-bpe" \
  --append-eod --workers 2
cat "$WORK/hf-llama3-expected.bin" "$WORK/hf-llama3-expected.bin" | cmp -s - "$WORK/twice_text_document.bin" ||
  fail "two copies of the corpus do not give two copies of the ids"

# Usage errors name the flag; a bad tokenizer.json names the file.
expect_status 2 "$BIN" --input "$WORK/hf-llama3-expected.jsonl" --output-prefix "$WORK/x" \
  --tokenizer-type HuggingFaceTokenizer
grep -q -- "--tokenizer-model is required" "$WORK/err.txt" || fail "missing --tokenizer-model not named"
expect_status 2 "$BIN" --input "$WORK/hf-llama3-expected.jsonl" --output-prefix "$WORK/x" \
  --tokenizer-type TikTokenizer --tokenizer-model "$MODELS/tiktoken-bpe.json"
grep -q -- "--tiktoken-pattern is required" "$WORK/err.txt" || fail "missing --tiktoken-pattern not named"
mkdir "$WORK/wordpiece"
printf '{"model": {"type": "WordPiece", "vocab": {}}}' >"$WORK/wordpiece/tokenizer.json"
expect_status 1 "$BIN" --input "$WORK/hf-llama3-expected.jsonl" --output-prefix "$WORK/x" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$WORK/wordpiece"
grep -q 'WordPiece' "$WORK/err.txt" || fail "unsupported model not named"
echo "mgt_tokenize_llama: ok"
