#!/usr/bin/env bash
# End-to-end checks of aux-loss-free load balancing (--moe-router-enable-expert-bias, CPU ranks
# over MPI): the expert bias changes the run; two data-parallel ranks, two expert-parallel ranks,
# TP=2 with sequence parallelism and PP=2 reproduce the one-rank run's losses (the counts summed
# over the ranks move every rank's bias alike); the biases are saved under Megatron's name and a
# resumed run continues the uninterrupted one bit for bit.
# Usage: bash tests/e2e/mgt_train_moe_expert_bias.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"

# A large update rate, so that the biases steer the choice within a few iterations.
MOE=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
     --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
     --mock-data --train-iters 12 --log-interval 1 --eval-iters 0
     --position-embedding-type rope --normalization RMSNorm --swiglu
     --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0 --attention-dropout 0
     --num-experts 8 --moe-router-topk 2 --moe-router-score-function sigmoid --moe-router-load-balancing-type none
     --moe-ffn-hidden-size 48 --moe-token-dispatcher-type alltoall
     --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64)
BIAS=(--moe-router-enable-expert-bias --moe-router-bias-update-rate 0.05)

# compare REFERENCE RUN FIRST BOUND: lm loss and grad norm within BOUND relative (0: equal) at every
# iteration of RUN from FIRST on.
compare() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run = load(sys.argv[1]), load(sys.argv[2])
first, bound = int(sys.argv[3]), float(sys.argv[4])
keys = sorted(k for k in ref if k >= first)
assert sorted(k for k in run if k >= first) == keys and keys, (sorted(run), keys)
for k in keys:
    for field in ("lm_loss", "grad_norm"):
        a, b = ref[k][field], run[k][field]
        assert (a == b) if bound == 0 else abs(a - b) <= bound * abs(a), f"{k} {field}: {a!r} vs {b!r}"
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len(keys)} iterations agree")
PY
}

expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --metrics-file "$WORK/one.jsonl" \
  --save "$WORK/ck" --save-interval 6
# From the second iteration on the biases route some tokens elsewhere.
python3 - "$WORK/plain.jsonl" "$WORK/one.jsonl" <<'PY' || fail "the expert bias did not change the run"
import json, sys
runs = [[j["lm_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"] for p in sys.argv[1:]]
assert runs[0][0] == runs[1][0] and runs[0][1:] != runs[1][1:], runs
PY
grep -aq "decoder.layers.1.mlp.router.expert_bias" "$WORK/ck/iter_0000006/mp_rank_00.h5" ||
  fail "no expert bias in the checkpoint"

# Two data-parallel ranks (each counting its micro-batches), and two expert-parallel ranks.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --metrics-file "$WORK/dp2.jsonl"
compare "$WORK/one.jsonl" "$WORK/dp2.jsonl" 1 1e-5
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --expert-model-parallel-size 2 \
  --metrics-file "$WORK/ep2.jsonl"
compare "$WORK/one.jsonl" "$WORK/ep2.jsonl" 1 1e-5
# Tensor parallelism with sequence parallelism (every rank routes the whole sequence) and pipeline
# parallelism (each stage updates its own layers' biases).
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --metrics-file "$WORK/tp2sp.jsonl"
compare "$WORK/one.jsonl" "$WORK/tp2sp.jsonl" 1 1e-5
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --pipeline-model-parallel-size 2 \
  --metrics-file "$WORK/pp2.jsonl"
compare "$WORK/one.jsonl" "$WORK/pp2.jsonl" 1 1e-5

# Resumed from iteration 6: the same losses, bit for bit.
rm -r "$WORK/ck/iter_0000012"
echo 6 >"$WORK/ck/latest_checkpointed_iteration.txt"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --load "$WORK/ck" --metrics-file "$WORK/resumed.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed.jsonl" 7 0

# A checkpoint without biases resumes with them starting at zero, saying so; mgt-eval routes with
# a checkpoint's biases (it reads them, with no such note).
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --train-iters 4 --save "$WORK/ck-plain" --save-interval 2 --exit-interval 2
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${BIAS[@]}" --train-iters 4 --load "$WORK/ck-plain"
grep -q "holds no expert bias for 2 MoE layers: their biases start at 0" "$WORK/err.txt" "$WORK/out.txt" ||
  fail "no note on the missing biases"
GPT2=("${MOE[@]}" --tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" "${BIAS[@]}" --train-iters 4 --save "$WORK/ck-gpt2" --save-interval 4
head -n 20 "$SRC/datasets/wikitext-103.wiki.test.tokens" >"$WORK/wiki.test.tokens"
expect_status 0 "$BIN/mgt-eval" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/ck-gpt2" \
  --micro-batch-size 4
grep -Eq '^ validation results on WIKITEXT103 \| avg loss: ' "$WORK/err.txt" || fail "mgt-eval on a biased checkpoint"
if grep -q "holds no expert bias" "$WORK/err.txt" "$WORK/out.txt"; then fail "mgt-eval did not read the biases"; fi
echo "ok"
