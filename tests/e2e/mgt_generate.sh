#!/usr/bin/env bash
# End-to-end checks of mgt-generate on a tiny checkpoint trained here: JSONL in and out,
# standard input and output, reproducible sampling, stop texts, log-probabilities, the atomic
# output file, interactive prompts on a terminal, Megatron's generation flags (--seq-length
# bounding prompt plus completion), and one-line errors.
# Usage: bash tests/e2e/mgt_generate.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

gpt2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$src/datasets/gpt2-vocab.json"
      --merge-file "$src/datasets/gpt2-merges.txt")
"$bin/mgt-train" --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --train-iters 2 \
  --eval-iters 0 --save "$work/ckpt" --save-interval 2 "${gpt2[@]}" >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; fail "training the checkpoint"; }

cat >"$work/prompts.jsonl" <<'JSON'
{"prompt": "Hello world", "id": 1}

{"prompt": "The quick brown fox jumps over the lazy"}
{"prompt": "Caf\u00e9 au lait"}
JSON

expect_status 0 "$bin/mgt-generate" --help
grep -q -- "--max-new-tokens" "$work/out.txt" || fail "--help does not list --max-new-tokens"

# Greedy by default; the tokenizer comes from the checkpoint; one JSON line per prompt.
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 6 \
  --return-log-probs
cp "$work/out.txt" "$work/greedy.jsonl"
python3 - "$work/greedy.jsonl" <<'PY' || fail "completion JSON"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["index"] for r in rows] == [0, 1, 2], rows
assert rows[2]["prompt"] == "Café au lait", rows[2]
for r in rows:
    assert r["finish_reason"] in ("eod", "stop", "length"), r
    assert len(r["tokens"]) == r["generated_tokens"] == len(r["log_probs"]) <= 6, r
    assert all(lp <= 0 for lp in r["log_probs"]), r
PY

# Same from standard input to standard output, with the model-shape flags repeated.
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --max-new-tokens 6 --return-log-probs --num-layers 2 \
  --hidden-size 32 < "$work/prompts.jsonl"
cmp -s "$work/out.txt" "$work/greedy.jsonl" || fail "stdin/stdout run differs from the file run"

# Sampling: a seed reproduces, the output file is written whole.
sample=(--load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 8 --top-k 0 --temperature 1.5)
expect_status 0 "$bin/mgt-generate" "${sample[@]}" --seed 5 --output "$work/a.jsonl"
expect_status 0 "$bin/mgt-generate" "${sample[@]}" --seed 5 --output "$work/b.jsonl" --micro-batch-size 1
cmp -s "$work/a.jsonl" "$work/b.jsonl" || fail "the same seed gave different completions"
[[ ! -s "$work/out.txt" ]] || fail "--output also wrote to standard output"
expect_status 0 "$bin/mgt-generate" "${sample[@]}" --seed 6 --output "$work/c.jsonl"
cmp -s "$work/a.jsonl" "$work/c.jsonl" && fail "different seeds gave the same completions"
expect_status 0 "$bin/mgt-generate" "${sample[@]}" --top-k 0 --top-p 0.9 --seed 5

# A stop text ends the completion before it.
stop=$(python3 -c "import json; r = json.loads(open('$work/greedy.jsonl').readline()); print(r['text'][2:5])")
if [[ -n "$stop" && "$stop" != -* ]]; then
  expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 6 \
    --stop "$stop"
  python3 - "$work/out.txt" "$stop" <<'PY' || fail "stop text"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["finish_reason"] == "stop" and sys.argv[2] not in r["text"], r
PY
fi

# Typed prompts when standard input is a terminal. `script` gives the program one; where no
# pseudo-terminal can be made (no /dev/pts in a container, say) the check is skipped, saying so.
if ! command -v script >/dev/null; then
  echo "SKIP: interactive mode not checked: no 'script' command"
elif ! script -qec "test -t 0" /dev/null </dev/null >/dev/null 2>&1; then
  echo "SKIP: interactive mode not checked: no pseudo-terminal can be made here"
else
  (printf 'Hello world\n'; sleep 1) | script -qec "'$bin/mgt-generate' --load '$work/ckpt' --max-new-tokens 6" \
    /dev/null >"$work/tty.txt" 2>&1 || true
  text=$(python3 -c "import json; print(json.loads(open('$work/greedy.jsonl').readline())['text'])")
  tr -d '\r' <"$work/tty.txt" | grep -qF "Hello world$text" || { cat "$work/tty.txt" >&2; fail "interactive mode"; }
fi

# Errors: one line, non-zero, no output file left behind.
printf '{"prompt": "ok"}\n{"text": "no prompt"}\n' >"$work/bad.jsonl"
expect_status 1 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/bad.jsonl" --output "$work/bad-out.jsonl"
grep -q "bad.jsonl:2:" "$work/err.txt" || fail "bad prompt line not named"
[[ ! -e "$work/bad-out.jsonl" ]] || fail "a failed run left its output file"
[[ -z $(ls -A "$work" | grep "bad-out") ]] || fail "a failed run left a temporary file"
# With the NullTokenizer a prompt is token ids: one outside the model's vocabulary is refused
# naming the prompt file's line (blank lines count), not as a failure inside the model.
"$bin/mgt-train" --mock-data --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 \
  --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 --train-iters 1 \
  --eval-iters 0 --save "$work/null-ckpt" --save-interval 1 --tokenizer-type NullTokenizer --vocab-size 100 \
  >"$work/train-null.log" 2>&1 || { cat "$work/train-null.log" >&2; fail "training the NullTokenizer checkpoint"; }
printf '{"prompt": "1 2 3"}\n\n{"prompt": "4 99999"}\n' >"$work/ids.jsonl"
expect_status 1 "$bin/mgt-generate" --load "$work/null-ckpt" --prompts "$work/ids.jsonl" --max-new-tokens 2
tail -1 "$work/err.txt" | grep -q "^mgt-generate: .*/ids.jsonl:3: prompt 2: NullTokenizer: token '99999' is outside the vocabulary" ||
  { cat "$work/err.txt" >&2; fail "a prompt id outside the vocabulary not refused with FILE:LINE"; }
expect_status 1 "$bin/mgt-generate" --load "$work/no-such-ckpt" --prompts "$work/prompts.jsonl"
grep -q "no-such-ckpt" "$work/err.txt" || fail "missing checkpoint not named"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --hidden-size 64
grep -q "hidden-size 64 disagrees" "$work/err.txt" || fail "disagreeing model flag not refused"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --top-p 0.5
grep -q -- "--top-k 0" "$work/err.txt" || fail "top-p with top-k not refused"
! grep -q "^loaded " "$work/err.txt" || fail "sampling flags checked only after the checkpoint loaded"
# What fails cheaply fails before the checkpoint loads: --output's directory, a bad first prompt.
expect_status 1 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --output "$work/no-dir/out.jsonl"
grep -q "no-dir' does not exist" "$work/err.txt" && ! grep -q "^loaded " "$work/err.txt" ||
  { cat "$work/err.txt" >&2; fail "--output in a missing directory not refused before loading"; }
expect_status 1 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --output "$work"
grep -q "is a directory" "$work/err.txt" || fail "--output naming a directory not refused"
expect_status 1 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/bad.jsonl"
grep -q "bad.jsonl:2:" "$work/err.txt" && ! grep -q "^loaded " "$work/err.txt" ||
  { cat "$work/err.txt" >&2; fail "a bad prompt in the first micro-batch not refused before loading"; }
# A --micro-batch-size far beyond the prompts file: the memory check counts the prompts it holds.
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 2 \
  --micro-batch-size 100000000
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --port 5000
grep -q -- "--port needs --server" "$work/err.txt" || fail "--port without --server not refused with a reason"
# A usage error is one line naming the flag, and exit 2: an unknown flag, a bad value.
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --no-such-flag
[[ $(wc -l <"$work/err.txt") == 1 ]] && grep -q -- "unknown flag --no-such-flag" "$work/err.txt" ||
  fail "unknown flag not refused on one line"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --temperature 0
[[ $(wc -l <"$work/err.txt") == 1 ]] && grep -q -- "--temperature must be" "$work/err.txt" ||
  fail "bad --temperature not named on one line"
# A prompts file that is a FIFO is a stream, read once its writer comes; a directory is refused
# at once, naming it.
mkfifo "$work/prompts.fifo"
(sleep 1; cat "$work/prompts.jsonl" >"$work/prompts.fifo") &
expect_status 0 timeout 60 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.fifo" --max-new-tokens 6 \
  --return-log-probs
wait
cmp -s "$work/out.txt" "$work/greedy.jsonl" || fail "prompts from a FIFO differ from the file run"
expect_status 1 timeout 60 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work"
grep -q "input '$work' is a directory" "$work/err.txt" || fail "a directory as --prompts not refused by name"

# The output file is strict JSON (no NaN, no Infinity), and a symlink already at its name is
# replaced, not written through.
echo precious >"$work/victim.txt"
ln -s "$work/victim.txt" "$work/linked.jsonl"
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 4 \
  --return-log-probs --output "$work/linked.jsonl"
[[ $(cat "$work/victim.txt") == precious ]] || fail "--output wrote through a symlink"
[[ -f "$work/linked.jsonl" && ! -L "$work/linked.jsonl" ]] || fail "--output is still a symlink"
python3 - "$work/linked.jsonl" <<'PY' || fail "completions are not strict JSON"
import json, sys
def refuse(name):
    raise ValueError("non-standard JSON constant " + name)
for line in open(sys.argv[1]):
    json.loads(line, parse_constant=refuse)
PY

# Megatron's generation command lines port: examples/inference/run_text_generation_server_345M.sh's
# flags (the model shape repeated and checked, --fp16 with a warning on the CPU, --seq-length,
# --seed) give the same greedy completions.
megatron=(--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --num-layers 2 --hidden-size 32
          --num-attention-heads 4 --max-position-embeddings 64 "${gpt2[@]}" --fp16 --micro-batch-size 1
          --seq-length 64 --seed 42)
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" "${megatron[@]}" --prompts "$work/prompts.jsonl" \
  --max-new-tokens 6
python3 - "$work/out.txt" "$work/greedy.jsonl" <<'PY' || fail "Megatron's generation flags changed the completions"
import json, sys
ours, greedy = ([json.loads(l) for l in open(path)] for path in sys.argv[1:])
assert [r["tokens"] for r in ours] == [r["tokens"] for r in greedy], (ours, greedy)
PY
# --seq-length bounds prompt plus completion: a completion that reaches it ends there.
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 30 \
  --seq-length 12
cp "$work/out.txt" "$work/bounded.jsonl"
python3 - "$work/bounded.jsonl" <<'PY' || fail "--seq-length does not bound prompt plus completion"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    total = r["prompt_tokens"] + r["generated_tokens"]
    assert total <= 12, r
    assert r["finish_reason"] != "length" or total == 12, r
assert any(r["finish_reason"] == "length" for r in rows), rows
PY
# Megatron Core's --inference-max-seq-length bounds the same way; the smaller bound holds.
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --max-new-tokens 30 \
  --inference-max-seq-length 12 --seq-length 40
cmp -s "$work/out.txt" "$work/bounded.jsonl" || fail "--inference-max-seq-length bounds differently"
# A prompt that fills the bound leaves no room; a bound past the checkpoint's positions is
# refused at start-up, as Megatron's validate_args refuses seq_length > max_position_embeddings.
expect_status 1 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --seq-length 4
grep -q -- "--seq-length) leave no room" "$work/err.txt" || fail "a prompt longer than --seq-length not explained"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/prompts.jsonl" --seq-length 65
[[ $(wc -l <"$work/err.txt") == 1 ]] && grep -q "seq-length 65 exceeds the checkpoint's max_position_embeddings (64)" \
  "$work/err.txt" || fail "--seq-length past the positions not refused in one line"
# tools/run_text_generation_server.py spells the sampling flags --top_k and --top_p.
expect_status 0 "$bin/mgt-generate" "${sample[@]}" --top_k 0 --top_p 0.9 --seed 5 --output "$work/underscore.jsonl"
expect_status 0 "$bin/mgt-generate" "${sample[@]}" --top-k 0 --top-p 0.9 --seed 5 --output "$work/dash.jsonl"
cmp -s "$work/underscore.jsonl" "$work/dash.jsonl" || fail "--top_k/--top_p differ from --top-k/--top-p"
# Older Megatron's examples/generate_text.sh flags are refused, naming what to give instead.
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --out-seq-length 101 --genfile "$work/g.json" --num-samples 8
grep -q -- "--out-seq-length is not supported by mgt-generate: .*--max-new-tokens" "$work/err.txt" &&
  grep -q -- "--genfile" "$work/err.txt" && grep -q -- "--num-samples" "$work/err.txt" ||
  fail "generate_text.sh's flags not refused by name"

printf '{"prompt": ""}\n' >"$work/empty.jsonl"
expect_status 1 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/empty.jsonl"
grep -q -- "--add-bos" "$work/err.txt" || fail "empty prompt not explained"
expect_status 0 "$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/empty.jsonl" --add-bos --max-new-tokens 3
[[ $(wc -l <"$work/err.txt") -ge 1 ]] || true
# SIGTERM (Slurm's scancel) mid-run: the micro-batch in progress finishes, the --output temporary
# is removed, exit status 143 with one line.
for _ in $(seq 1 3000); do echo '{"prompt": "Hello there"}'; done >"$work/many.jsonl"
"$bin/mgt-generate" --load "$work/ckpt" --prompts "$work/many.jsonl" --output "$work/many-out.jsonl" \
  --max-new-tokens 30 --micro-batch-size 1 >"$work/sig.out" 2>"$work/sig.err" &
pid=$!
for _ in $(seq 1 600); do
  compgen -G "$work/many-out.jsonl.tmp.*" >/dev/null && break
  sleep 0.1
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[[ $status == 143 ]] || fail "SIGTERM: exit status $status, expected 143: $(tail -2 "$work/sig.err")"
grep -q "^mgt-generate: interrupted by SIGTERM after [0-9]* prompts; no output written" "$work/sig.err" ||
  fail "SIGTERM not reported: $(tail -2 "$work/sig.err")"
! compgen -G "$work/many-out.jsonl*" >/dev/null || fail "SIGTERM left output behind: $(ls "$work")"
echo "mgt-generate end-to-end: ok"
