#!/usr/bin/env bash
# The evaluation and generation sbatch templates, run with a stand-in srun that executes the
# step in place: both write their results where asked, and refuse a short argument list.
# Usage: bash tests/e2e/slurm_inference.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

mkdir -p "$work/fake"
cat > "$work/fake/srun" <<'SH'
#!/usr/bin/env bash
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
exec "$@"
SH
chmod +x "$work/fake/srun"
export PATH="$work/fake:$PATH" MGT_BIN="$bin"

gpt2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$src/datasets/gpt2-vocab.json"
      --merge-file "$src/datasets/gpt2-merges.txt")
"$bin/mgt-train" --mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 64 \
  --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 --train-iters 1 \
  --eval-iters 0 --save "$work/ckpt" --save-interval 1 "${gpt2[@]}" >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; fail "training the checkpoint"; }

head -n 12 "$src/datasets/lambada_test.jsonl" > "$work/lambada.jsonl"
head -n 40 "$src/datasets/wikitext-103.wiki.test.tokens" > "$work/wiki.test.tokens"
expect_status 0 bash "$src/slurm/eval.sbatch" "$work/ckpt" "$work/results" "$work/lambada.jsonl" \
  "$work/wiki.test.tokens" --micro-batch-size 4
python3 - "$work/results" <<'PY' || fail "evaluation results"
import json, os, sys
lam = json.load(open(os.path.join(sys.argv[1], "lambada.json")))
wiki = json.load(open(os.path.join(sys.argv[1], "wikitext103.json")))
assert lam["task"] == "LAMBADA" and lam["counts"]["examples"] == 12, lam
assert wiki["task"] == "WIKITEXT103" and wiki["ppl"] > 1, wiki
PY

printf '{"prompt": "Hello"}\n{"prompt": "World"}\n' > "$work/prompts.jsonl"
expect_status 0 bash "$src/slurm/generate.sbatch" "$work/ckpt" "$work/prompts.jsonl" "$work/out.jsonl" \
  --max-new-tokens 4
[[ $(wc -l <"$work/out.jsonl") == 2 ]] || fail "generate.sbatch wrote $(wc -l <"$work/out.jsonl") completions"

expect_status 2 bash "$src/slurm/eval.sbatch" "$work/ckpt"
grep -q "usage:" "$work/err.txt" || fail "eval.sbatch without arguments"
expect_status 2 bash "$src/slurm/generate.sbatch" "$work/ckpt"
grep -q "usage:" "$work/err.txt" || fail "generate.sbatch without arguments"
echo "slurm inference templates: ok"
