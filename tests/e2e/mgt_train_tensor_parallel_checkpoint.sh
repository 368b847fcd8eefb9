#!/usr/bin/env bash
# End-to-end checks of checkpoints under tensor parallelism (mpiexec, CPU backend): a TP=2 run
# writes one file per tensor-parallel rank, each with its own shards (the layout recorded in
# their metadata); resumed at
# TP=2 it continues bit for bit, resumed at TP=1 and at TP=4 it continues the one-rank run's
# loss curve (within 1e-5 relative), and a one-rank checkpoint resumes at TP=2 with sequence
# parallelism; mgt-eval and mgt-generate (one process) read the TP=2 checkpoint as the one-rank
# run's. The model has query and key norms (--qk-layernorm): replicated tensors whose gradients
# each tensor-parallel rank holds for its own heads only.
# Usage: bash tests/e2e/mgt_train_tensor_parallel_checkpoint.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"
GPT2+=(--qk-layernorm)

# keep_iteration SAVE COPY N: COPY holds SAVE's iteration N alone, the tracker naming it.
keep_iteration() {
  local name
  name=$(printf 'iter_%07d' "$3")
  mkdir "$2"
  cp -r "$1/$name" "$2/"
  echo "$3" >"$2/latest_checkpointed_iteration.txt"
}

# One rank and TP=2 (distributed optimizer: nothing to shard at DP=1), each saving at 10 and 20.
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" --save "$WORK/ckpt-1" --save-interval 10 \
  --metrics-file "$WORK/one.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --use-distributed-optimizer \
  --save "$WORK/ckpt-tp2" --save-interval 10 --metrics-file "$WORK/tp2.jsonl"
grep -q "successfully saved checkpoint from iteration      10 to $WORK/ckpt-tp2 \[ t 1/2, p 1/1 \]" "$WORK/out.txt" ||
  fail "TP=2: no save line"
compare_curves "$WORK/one.jsonl" "$WORK/tp2.jsonl" same
[[ "$(ls "$WORK/ckpt-tp2/iter_0000010" | tr '\n' ' ')" == "mp_rank_00.h5 mp_rank_01.h5 " ]] ||
  fail "TP=2: not one file per tensor-parallel rank"
# The layout trained with, in the metadata (an HDF5 attribute holding JSON).
for f in mp_rank_00.h5 mp_rank_01.h5; do
  grep -aq '{"world_size": 2, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1, "data_parallel_size": 1, "sequence_parallel": false, "use_distributed_optimizer": true, "stored_tensors": "per_rank"}' \
    "$WORK/ckpt-tp2/iter_0000010/$f" || fail "TP=2: layout not recorded in $f"
  # Each rank's own shards, not the whole tensors.
  [[ "$(stat -c %s "$WORK/ckpt-tp2/iter_0000010/$f")" -lt \
     "$(( $(stat -c %s "$WORK/ckpt-1/iter_0000010/mp_rank_00.h5") * 3 / 4 ))" ]] || fail "TP=2: $f holds more than its shards"
done

for n in 2 1 4; do keep_iteration "$WORK/ckpt-tp2" "$WORK/from-tp2-to-$n" 10; done
keep_iteration "$WORK/ckpt-1" "$WORK/from-1-to-2" 10

# Resumed on its own layout: the uninterrupted TP=2 run, bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --use-distributed-optimizer \
  --load "$WORK/from-tp2-to-2" --save "$WORK/from-tp2-to-2" --save-interval 10 --metrics-file "$WORK/tp2-tp2.jsonl"
grep -q "successfully loaded checkpoint from $WORK/from-tp2-to-2 \[ t 1/2, p 1/1 \] at iteration 10" "$WORK/out.txt" ||
  fail "TP=2 resume not reported"
compare_curves "$WORK/tp2.jsonl" "$WORK/tp2-tp2.jsonl" exact
# Resharded on load: one rank, and four tensor-parallel ranks, continue the one-rank curve.
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" --load "$WORK/from-tp2-to-1" --save "$WORK/from-tp2-to-1" \
  --save-interval 10 --metrics-file "$WORK/tp2-1.jsonl"
compare_curves "$WORK/one.jsonl" "$WORK/tp2-1.jsonl" continues
expect_status 0 ranks 4 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 4 --load "$WORK/from-tp2-to-4" \
  --save "$WORK/from-tp2-to-4" --save-interval 10 --metrics-file "$WORK/tp2-tp4.jsonl"
# TP=4 would pad 128 ids to 256; the checkpoint's 128 rows are kept (4 divides them).
grep -q '^ > padded vocab of the checkpoint kept (size: 128) with 0 dummy tokens (new size: 128)$' "$WORK/out.txt" ||
  fail "TP=4: the checkpoint's padded vocabulary not kept"
compare_curves "$WORK/one.jsonl" "$WORK/tp2-tp4.jsonl" continues
# And the other way: a one-rank checkpoint on two tensor-parallel ranks, sequence parallel.
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --load "$WORK/from-1-to-2" --save "$WORK/from-1-to-2" --save-interval 10 --metrics-file "$WORK/1-tp2.jsonl"
compare_curves "$WORK/one.jsonl" "$WORK/1-tp2.jsonl" continues

# One process reads the TP=2 checkpoint as the one-rank run's: WikiText-style perplexity of a
# corpus line, and greedy completions, agree with those of the one-rank checkpoint.
head -n 3 "$WORK/corpus.jsonl" | python3 -c '
import json, sys
print(" ".join(json.loads(l)["text"] for l in sys.stdin), end="")' >"$WORK/wiki.tokens"
for c in 1 tp2; do
  expect_status 0 "$BIN/mgt-eval" --task WIKITEXT103 --valid-data "$WORK/wiki.tokens" --load "$WORK/ckpt-$c" \
    --micro-batch-size 2 --output "$WORK/eval-$c.json"
  printf '{"prompt": "%s"}\n' "7 38 74" "0 3 19 100" >"$WORK/prompts.jsonl"
  expect_status 0 "$BIN/mgt-generate" --load "$WORK/ckpt-$c" --prompts "$WORK/prompts.jsonl" --max-new-tokens 8 \
    --return-log-probs
  cp "$WORK/out.txt" "$WORK/generate-$c.jsonl"
done
python3 - "$WORK" <<'PY' || fail "mgt-eval / mgt-generate read the TP=2 checkpoint differently"
import json, sys
w = sys.argv[1]
a, b = (json.load(open(f"{w}/eval-{c}.json")) for c in ("1", "tp2"))
assert a["checkpoint"]["iteration"] == b["checkpoint"]["iteration"] == 20, (a, b)
assert a["counts"]["scored_targets"] == b["counts"]["scored_targets"] > 100, (a, b)
assert abs(a["avg_loss"] - b["avg_loss"]) <= 1e-5 * abs(a["avg_loss"]), (a["avg_loss"], b["avg_loss"])
x, y = ([json.loads(l) for l in open(f"{w}/generate-{c}.jsonl")] for c in ("1", "tp2"))
assert len(x) == len(y) == 2, (x, y)
for p, q in zip(x, y):
    assert p["tokens"] == q["tokens"] and len(p["tokens"]) == 8, (p, q)
    assert all(abs(s - t) <= 1e-4 for s, t in zip(p["log_probs"], q["log_probs"])), (p, q)
print(f"mgt-eval avg loss {a['avg_loss']:.9f} (one rank) vs {b['avg_loss']:.9f} (TP=2); completions identical")
PY
echo "mgt-train tensor-parallel checkpoints: all checks passed"
