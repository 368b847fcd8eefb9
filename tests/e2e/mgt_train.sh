#!/usr/bin/env bash
# End-to-end checks of mgt-train: tokenize a small corpus, train a tiny GPT with checkpoints,
# resume from them, read Megatron's log fields and the metrics file, stop cleanly on SIGTERM,
# and refuse bad flags with exit code 2.
# Usage: bash tests/e2e/mgt_train.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")
head -n 1500 "$SRC/datasets/corpus-tinyshakespeare.jsonl" >"$WORK/corpus.jsonl"
"$BIN/mgt-tokenize" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/shak" "${GPT2[@]}" --append-eod \
  --quiet >/dev/null 2>&1
DATA="$WORK/shak_text_document"

MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
       --lr-decay-style cosine --min-lr 1e-4 --data-path "$DATA" --split 90,5,5
       --data-cache-path "$WORK/cache" "${GPT2[@]}")
RUN=("${MODEL[@]}" --train-iters 10 --log-interval 2 --eval-interval 3 --eval-iters 2
     --save "$WORK/ckpt" --save-interval 4 --log-throughput --metrics-file "$WORK/metrics.jsonl")

# Usage.
expect_status 0 "$BIN/mgt-train" --help
grep -q -- "--exit-signal-handler" "$WORK/out.txt" || fail "--help does not list --exit-signal-handler"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --no-such-flag
grep -q "^mgt-train: unknown flag --no-such-flag" "$WORK/err.txt" || fail "unknown flag not named"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --fp32-residual-connection
grep -q -- "--fp32-residual-connection is a Megatron-LM flag that mgt-train does not support" "$WORK/err.txt" ||
  fail "unsupported Megatron flag not named"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --lr abc
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --reset-attention-mask
grep -q -- "--reset-attention-mask" "$WORK/err.txt" || fail "refusal does not name the flag"
# Numbers must be finite and in their flag's range, and a bad one is blamed on its own flag.
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --lr inf
grep -q "^mgt-train: --lr: 'inf' is not a finite number$" "$WORK/err.txt" || fail "--lr inf accepted"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --lr nan
grep -q "^mgt-train: --lr: 'nan' is not a finite number$" "$WORK/err.txt" || fail "--lr nan not blamed on --lr"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --adam-beta2 1
grep -q "^mgt-train: --adam-beta2 must be in \[0, 1), got 1$" "$WORK/err.txt" || fail "--adam-beta2 1 accepted"

# The memory a run needs is estimated before anything is allocated: --dry-run prints it, and a
# model that cannot fit is refused with the estimate and what is available, in no time.
expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --dry-run
python3 - "$WORK/out.txt" <<'PY' || fail "--dry-run JSON"
import json, sys
r = json.load(open(sys.argv[1]))
m = r["memory_per_rank_bytes"]
assert r["parameters"] == r["parameters_per_rank"] > 0, r
assert m["weights"] == m["gradients"] == 4 * r["parameters"] and m["optimizer_state"] == 8 * r["parameters"], r
assert m["total"] == sum(v for k, v in m.items() if k != "total") and m["activations"] > 0, r
assert r["fits"] is True and r["layout"]["data_parallel_size"] == 1, r
PY
grep -q "^memory per rank: .* = weights .* + gradients .* + Adam moments .* + activations " "$WORK/err.txt" ||
  fail "--dry-run summary"
[[ ! -e "$WORK/cache" && ! -e "$WORK/ckpt" ]] || fail "--dry-run read data or wrote a checkpoint"
for huge in "--num-layers 100000000" "--hidden-size 1000000000"; do
  # shellcheck disable=SC2086
  expect_status 1 timeout 120 "$BIN/mgt-train" "${RUN[@]}" $huge
  grep -q "^mgt-train: training this model needs an estimated .* of memory per rank for .* parameters (weights .*), but only .* is available (" \
    "$WORK/err.txt" || fail "$huge not refused with the estimate"
done

# Train until --exit-interval 6 stops the run: the indices are built into the cache,
# checkpoints at 4 (--save-interval) and 6 (on exit).
expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --exit-interval 6
LOG="$WORK/out.txt"
iteration_lines="$(grep -c '] iteration ' "$LOG")"
[[ "$iteration_lines" == 3 ]] || fail "expected 3 iteration lines, got $iteration_lines"
line="$(grep '] iteration        2/      10 |' "$LOG")" || fail "no line for iteration 2"
for field in 'consumed samples:            8 \|' 'elapsed time per iteration \(ms\): [0-9]+\.[0-9] \|' \
    'throughput per GPU \(TFLOP/s/GPU\): [0-9]+\.[0-9]+ \|' 'learning rate: [0-9]\.[0-9]{6}E[-+][0-9]{2} \|' \
    'global batch size:     4 \|' 'lm loss: [0-9]\.[0-9]{6}E\+[0-9]{2} \|' 'loss scale: 1\.0 \|' \
    'grad norm: [0-9]+\.[0-9]{3} \|' 'number of skipped iterations:   0 \|' \
    'number of nan iterations:   0 \|' 'tokens per second: [0-9]+\.[0-9] \|$'; do
  grep -Eq -- "$field" <<<"$line" || fail "iteration line lacks '$field': $line"
done
grep -q ' validation loss at iteration 3 | lm loss value: ' "$LOG" || fail "no validation at iteration 3"
grep -q 'successfully saved checkpoint from iteration       4' "$LOG" || fail "no checkpoint at 4"
grep -q 'exiting program at iteration 6' "$LOG" || fail "--exit-interval exit not reported"
[[ "$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")" == 6 ]] || fail "tracker does not say 6"
[[ -s "$WORK/ckpt/iter_0000004/mp_rank_00.h5" && -s "$WORK/ckpt/iter_0000006/mp_rank_00.h5" ]] ||
  fail "checkpoint files missing"
ls "$WORK/cache" | grep -q -- '-GPTDataset-train-shuffle_index.npy$' || fail "no index cache written"
[[ "$(grep -c '"event": "train"' "$WORK/metrics.jsonl")" == 3 ]] || fail "metrics file lacks train lines"
# The step's phases, timed on the backend's queue, in every train line.
[[ "$(grep -c '"forward_backward_ms": [0-9.e+-]*, "grads_sync_ms": [0-9.e+-]*, "optimizer_ms": ' "$WORK/metrics.jsonl")" == 3 ]] ||
  fail "train lines lack the step's phase times"

# Resume with the same flags: the cached indices are reused, the run continues at iteration 7
# with 24 samples consumed and ends with the validation and test evaluations.
expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --load "$WORK/ckpt"
grep -q "successfully loaded checkpoint from $WORK/ckpt \[ t 1/1, p 1/1 \] at iteration 6" "$WORK/out.txt" ||
  fail "resume not reported"
grep -q '] iteration        8/      10 | consumed samples:           32 |' "$WORK/out.txt" ||
  fail "resumed run does not continue at iteration 8 with 32 consumed samples"
! grep -q '] iteration        2/' "$WORK/out.txt" || fail "resumed run started over"
grep -q 'Load the GPTDataset train indices' "$WORK/err.txt" || fail "cached indices not reused"
grep -q ' validation loss at iteration 10 on test set | lm loss value: ' "$WORK/out.txt" || fail "no test evaluation"
[[ "$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")" == 10 ]] || fail "tracker does not say 10"
[[ "$(grep -c '"event": "train"' "$WORK/metrics.jsonl")" == 5 ]] || fail "metrics file not appended to"
grep -q '"event": "test"' "$WORK/metrics.jsonl" || fail "metrics file lacks the test line"

# Another shape: a clear error naming the tensor.
expect_status 1 "$BIN/mgt-train" "${RUN[@]}" --hidden-size 64 --load "$WORK/ckpt"
grep -q "model/embedding.word_embeddings.weight" "$WORK/err.txt" || fail "shape mismatch does not name the tensor"
# Other heads of the same hidden size keep every tensor's shape: refused by the saved arguments, as
# Megatron's check_checkpoint_args refuses them.
expect_status 1 "$BIN/mgt-train" "${RUN[@]}" --num-attention-heads 8 --load "$WORK/ckpt"
grep -q "was saved with --num-attention-heads 4 (this run: 8)" "$WORK/err.txt" || fail "another head count loaded"

# Data tokenized with a larger vocabulary than the model's: refused naming the dataset, before the
# model's embedding sees the id.
python3 -c "
for d in range(50):
    print('{\"text\": \"%s\"}' % ' '.join(str(52611 if (d, k) == (37, 5) else (40 * d + k) % 50000) for k in range(40)))
" >"$WORK/ids.jsonl"
"$BIN/mgt-tokenize" --input "$WORK/ids.jsonl" --output-prefix "$WORK/ids" --tokenizer-type NullTokenizer \
  --vocab-size 60000 --quiet >/dev/null 2>&1 || fail "could not tokenize the ids"
expect_status 1 "$BIN/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --train-iters 20 --eval-iters 0 \
  --data-path "$WORK/ids_text_document" --split 100,0,0 --data-cache-path "$WORK/ids-cache" "${GPT2[@]}"
grep -q "^mgt-train: $WORK/ids_text_document: sample [0-9]* holds token id 52611, outside the model's vocabulary of 50304" \
  "$WORK/err.txt" || fail "an id outside the vocabulary not named with its dataset"

# --exit-on-missing-checkpoint: a --load directory without a checkpoint stops the run (exit 1)
# instead of training from random weights.
expect_status 1 "$BIN/mgt-train" "${RUN[@]}" --load "$WORK/no-ckpt" --exit-on-missing-checkpoint
grep -q "^mgt-train: --load $WORK/no-ckpt holds no checkpoint .*--exit-on-missing-checkpoint stops the run" \
  "$WORK/err.txt" || fail "--exit-on-missing-checkpoint trained from scratch"

# Megatron's mock data instead of a dataset.
expect_status 0 "$BIN/mgt-train" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --micro-batch-size 2 --lr 1e-3 --train-iters 2 --log-interval 1 \
  --eval-iters 1 --mock-data "${GPT2[@]}"
grep -q '] iteration        2/       2 | consumed samples:            4 |' "$WORK/out.txt" ||
  fail "no training on mock data"

# SIGTERM: the current iteration finishes, a checkpoint is saved, exit status 0.
"$BIN/mgt-train" "${MODEL[@]}" --train-iters 100000 --log-interval 1 --eval-iters 0 \
  --save "$WORK/sig" --save-interval 100000 >"$WORK/sig.txt" 2>"$WORK/sig.err" &
pid=$!
for _ in $(seq 1 600); do
  grep -q '] iteration ' "$WORK/sig.txt" 2>/dev/null && break
  sleep 0.1
done
kill -TERM "$pid"
set +e
wait "$pid"
status=$?
set -e
[[ "$status" == 0 ]] || { cat "$WORK/sig.err" >&2; fail "SIGTERM: exit status $status"; }
grep -q 'exiting program after receiving SIGTERM.' "$WORK/sig.txt" || fail "SIGTERM exit not reported"
saved="$(cat "$WORK/sig/latest_checkpointed_iteration.txt")"
[[ -s "$WORK/sig/iter_$(printf '%07d' "$saved")/mp_rank_00.h5" ]] || fail "no checkpoint after SIGTERM"

echo "mgt-train e2e: all checks passed"
