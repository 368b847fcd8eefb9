#!/usr/bin/env bash
# End-to-end checks of mgt-train with Mixture-of-Experts layers (CPU backend): a Mixtral-style
# model (8 experts, top-2, aux_loss, z-loss, every other layer MoE, a shared expert) learns, logs
# load_balancing_loss and z_loss as Megatron does (log line, metrics.jsonl); data parallelism
# with the distributed optimizer reproduces the one-rank run (lm loss and the auxiliary losses,
# 20 iterations, within 1e-5 relative); a capacity factor drops tokens and still trains; a
# checkpoint resumes bit for bit; forced load balancing routes evenly; the router in fp64 trains,
# resumes and records itself; mgt-eval evaluates an MoE checkpoint; what is not implemented is
# refused by name.
# Usage: bash tests/e2e/mgt_train_moe.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

source "$SRC/tests/e2e/lib/mpi_ranks.bash"

BASE=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
     --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
     --mock-data --train-iters 20 --log-interval 1
     --eval-interval 10 --eval-iters 1 --position-embedding-type rope --normalization RMSNorm --swiglu
     --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0 --attention-dropout 0
     --num-experts 8 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2
     --moe-z-loss-coeff 1e-3 --moe-ffn-hidden-size 48 --moe-layer-freq "([0]+[1])*1"
     --moe-shared-expert-intermediate-size 32 --moe-token-dispatcher-type alltoall)
MOE=("${BASE[@]}" --tokenizer-type NullTokenizer --vocab-size 127)

# compare REFERENCE RUN [exact]: lm loss, load_balancing_loss and z_loss within 1e-5 relative, the
# grad norm within 1e-4, at every logged iteration.
compare() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run = load(sys.argv[1]), load(sys.argv[2])
exact = len(sys.argv) > 3
keys = sorted(k for k in run if k in ref) if exact else sorted(ref)
assert exact or sorted(run) == keys, f"logged {sorted(run)}, expected {keys}"
assert len(keys) >= 10, keys
worst = {}
for k in keys:
    for field, bound in (("lm_loss", 1e-5), ("load_balancing_loss", 1e-5), ("z_loss", 1e-5), ("grad_norm", 1e-4)):
        a, b = ref[k][field], run[k][field]
        rel = abs(a - b) / abs(a)
        worst[field] = max(worst.get(field, 0.0), rel)
        assert (a == b) if exact else rel <= bound, f"{k} {field}: {a!r} vs {b!r} (relative {rel:.3g})"
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len(keys)} iterations, largest relative differences "
      + ", ".join(f"{f} {v:.2e}" for f, v in worst.items()))
PY
}

# One rank: it learns, and logs the auxiliary losses as Megatron does.
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/moe-1.jsonl"
grep -qE '\] iteration +20/ +20 \|.* lm loss: [0-9.E+-]+ \| load_balancing_loss: [0-9.E+-]+ \| z_loss: [0-9.E+-]+ \| loss scale' \
  "$WORK/out.txt" || fail "no load_balancing_loss and z_loss in the log line"
python3 - "$WORK/moe-1.jsonl" <<'PY' || fail "the MoE model does not learn, or its losses are off"
import json, sys
train = [j for j in map(json.loads, open(sys.argv[1])) if j["event"] == "train"]
assert train[-1]["lm_loss"] < 0.8 * train[0]["lm_loss"], (train[0]["lm_loss"], train[-1]["lm_loss"])
# Balanced routing gives a load-balancing loss near 1 (its minimum, E·Σ(1/E)·(1/E)·… = 1).
assert all(0.5 < j["load_balancing_loss"] < 3.0 for j in train), [j["load_balancing_loss"] for j in train]
assert all(j["z_loss"] > 0 for j in train)
PY

# Data parallelism, plain and with the distributed optimizer.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/moe-dp2.jsonl"
compare "$WORK/moe-1.jsonl" "$WORK/moe-dp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --use-distributed-optimizer --metrics-file "$WORK/moe-dp2-dist.jsonl"
compare "$WORK/moe-1.jsonl" "$WORK/moe-dp2-dist.jsonl"

# Per layer with --moe-per-layer-logging, under Megatron's TensorBoard names (layer 0 is dense: 0).
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --train-iters 3 --lr-warmup-iters 1 --moe-per-layer-logging --tensorboard-dir "$WORK/tb" \
  --metrics-file "$WORK/per-layer.jsonl"
python3 - "$WORK/per-layer.jsonl" <<'PY' || fail "no per-layer MoE losses in metrics.jsonl"
import json, sys
j = [j for j in map(json.loads, open(sys.argv[1])) if j["event"] == "train"][-1]
assert j["moe/load_balancing_loss_layer_0"] == 0.0 and j["moe/z_loss_layer_0"] == 0.0, j
assert abs(j["moe/load_balancing_loss_layer_1"] - j["load_balancing_loss"]) < 1e-6 * j["load_balancing_loss"], j
PY
for tag in load_balancing_loss z_loss moe/load_balancing_loss_layer_1 moe/z_loss_layer_1; do
  grep -aq "$tag" "$WORK"/tb/events.out.tfevents.* || fail "TensorBoard has no $tag"
done

# A capacity factor drops tokens (by probability, padded, and by position) and still trains.
for policy in "--moe-token-drop-policy probs --moe-pad-expert-input-to-capacity" "--moe-token-drop-policy position"; do
  # shellcheck disable=SC2086
  expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --train-iters 4 --moe-expert-capacity-factor 0.5 $policy \
    --metrics-file "$WORK/capacity.jsonl"
  grep -q '"load_balancing_loss"' "$WORK/capacity.jsonl" || fail "capacity run: no load_balancing_loss"
done

# --moe-router-force-load-balancing routes by random logits: near-even loads from the first
# iteration (the load-balancing loss near its minimum of 1), and the run trains.
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --train-iters 4 --moe-router-force-load-balancing \
  --metrics-file "$WORK/forced.jsonl"
python3 - "$WORK/forced.jsonl" <<'PY' || fail "forced load balancing: losses off"
import json, sys
train = [j for j in map(json.loads, open(sys.argv[1])) if j["event"] == "train"]
assert len(train) == 4 and all(0.9 < j["load_balancing_loss"] < 1.2 for j in train), train
PY

# --moe-router-dtype fp64: the gate's sums in fp64 (its logits and gradients then rounded once).
# The run is not the fp32 router's bit for bit, but within the bounds above; data parallelism with
# the distributed optimizer and expert parallelism reproduce it; its checkpoint records the type
# and resumes bit for bit.
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --moe-router-dtype fp64 --metrics-file "$WORK/fp64.jsonl" \
  --save "$WORK/ck-fp64" --save-interval 10
compare "$WORK/moe-1.jsonl" "$WORK/fp64.jsonl"
python3 - "$WORK/moe-1.jsonl" "$WORK/fp64.jsonl" <<'PY' || fail "--moe-router-dtype fp64 changed nothing"
import json, sys
a, b = ([j["grad_norm"] for j in map(json.loads, open(p)) if j["event"] == "train"] for p in sys.argv[1:])
assert a != b
PY
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --moe-router-dtype fp64 --use-distributed-optimizer \
  --metrics-file "$WORK/fp64-dp2.jsonl"
compare "$WORK/fp64.jsonl" "$WORK/fp64-dp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --moe-router-dtype fp64 --expert-model-parallel-size 2 \
  --metrics-file "$WORK/fp64-ep2.jsonl"
compare "$WORK/fp64.jsonl" "$WORK/fp64-ep2.jsonl"
grep -aq '"moe_router_dtype": "fp64"' "$WORK"/ck-fp64/iter_0000010/*.h5 || fail "the checkpoint does not record fp64 routing"
echo 10 >"$WORK/ck-fp64/latest_checkpointed_iteration.txt"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --moe-router-dtype fp64 --load "$WORK/ck-fp64" \
  --metrics-file "$WORK/fp64-resumed.jsonl"
compare "$WORK/fp64.jsonl" "$WORK/fp64-resumed.jsonl" exact

# Save at 10 and resume: the uninterrupted run, bit for bit.
CK="$WORK/ckpt"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --save "$CK" --save-interval 10 --exit-interval 10
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$CK" --metrics-file "$WORK/resumed.jsonl"
compare "$WORK/moe-1.jsonl" "$WORK/resumed.jsonl" exact

# mgt-eval reads the MoE layers from the checkpoint's record of the flags.
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")
expect_status 0 "$BIN/mgt-train" "${BASE[@]}" "${GPT2[@]}" --train-iters 4 --lr-warmup-iters 1 --eval-iters 0 --save "$WORK/gpt2-moe" \
  --save-interval 4
head -n 30 "$SRC/datasets/wikitext-103.wiki.test.tokens" >"$WORK/wiki.test.tokens"
expect_status 0 "$BIN/mgt-eval" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/gpt2-moe" \
  --micro-batch-size 4
grep -Eq '^ validation results on WIKITEXT103 \| avg loss: ' "$WORK/err.txt" || fail "mgt-eval on an MoE checkpoint"
# A checkpoint trained with Sinkhorn routing evaluates by its gates (the sigmoid at top-1).
expect_status 0 "$BIN/mgt-train" "${BASE[@]}" "${GPT2[@]}" --train-iters 4 --lr-warmup-iters 1 --eval-iters 0 \
  --moe-router-load-balancing-type sinkhorn --moe-aux-loss-coeff 0 --moe-router-topk 1 --save "$WORK/gpt2-sinkhorn" \
  --save-interval 4
expect_status 0 "$BIN/mgt-eval" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/gpt2-sinkhorn" \
  --micro-batch-size 4
grep -Eq '^ validation results on WIKITEXT103 \| avg loss: ' "$WORK/err.txt" || fail "mgt-eval on a Sinkhorn checkpoint"

# Refused, naming what is missing.
expect_status 2 "$BIN/mgt-train" "${MOE[@]}" --moe-enable-deepep
grep -q -- "--moe-enable-deepep is not supported by mgt-train: DeepEP" "$WORK/err.txt" || fail "DeepEP not refused"
echo "ok"
