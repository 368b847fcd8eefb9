#!/usr/bin/env bash
# End-to-end checks of --moe-use-upcycling (CPU ranks): a dense SwiGLU model trained 2 iterations
# and saved is upcycled into 4 experts, top-2, at EP=2 on 2 ranks (one dense layer, one MoE
# layer). Every expert being a whole copy of the MLP and the top-2 probabilities summing to 1,
# the MoE run's first lm loss is the dense run's at iteration 3 (the same weights and, from the
# dense run's consumed samples, the same batch). The upcycled model is iteration 1 of --save
# without optimizer state; the run itself starts at iteration 0 and saves as usual, and its
# checkpoint resumes without the flag. Granularity 2 (each expert half the MLP) trains; a --save
# that holds a checkpoint, an MoE checkpoint, a dense MLP of another size and a planned save at
# iteration 1 are refused with one line. Under TP=2 the same first loss.
# Usage: bash tests/e2e/mgt_train_moe_upcycling.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"
source "$SRC/tests/e2e/lib/moe_equivalence.bash"

DENSE=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --ffn-hidden-size 48 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4
       --lr-decay-style cosine --lr-warmup-iters 1 --mock-data --log-interval 1 --eval-iters 0
       --position-embedding-type rope --normalization RMSNorm --swiglu
       --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0 --attention-dropout 0
       --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64)
EXPERTS=(--num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-token-dispatcher-type alltoall)

# The dense run: 4 iterations, saved at 2 and 4; the checkpoint of iteration 2 is the one upcycled.
expect_status 0 "$BIN/mgt-train" "${DENSE[@]}" --train-iters 4 --save "$WORK/dense" --save-interval 2 \
  --metrics-file "$WORK/dense.jsonl"
rm -r "$WORK/dense/iter_0000004"
echo 2 >"$WORK/dense/latest_checkpointed_iteration.txt"

# same_loss REF ITER RUN RUN_ITER BOUND: RUN's lm loss at RUN_ITER is REF's at ITER within BOUND (relative).
same_loss() {
  python3 - "$@" <<'PY'
import json, sys
def losses(path):
    return {j["iteration"]: j["lm_loss"] for j in map(json.loads, open(path)) if j["event"] == "train"}
a = losses(sys.argv[1])[int(sys.argv[2])]
b = losses(sys.argv[3])[int(sys.argv[4])]
rel = abs(a - b) / abs(a)
assert rel <= float(sys.argv[5]), f"{a!r} vs {b!r} (relative {rel:.3g})"
print(f"{sys.argv[3].rsplit('/', 1)[-1]} iteration {sys.argv[4]}: lm loss {b!r} against {a!r} (relative {rel:.2e})")
PY
}

# error_line MESSAGE: the run's error, its last line on stderr after the start-up's notes, is MESSAGE.
error_line() {
  tail -1 "$WORK/err.txt" | grep -qF -- "mgt-train: $1" || fail "expected '$1', got: $(tail -1 "$WORK/err.txt")"
}

# Upcycled at EP=2, layer 0 dense and layer 1 of experts.
expect_status 0 ranks 2 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --moe-layer-freq "([0]+[1])*1" \
  --expert-model-parallel-size 2 --train-iters 2 --moe-use-upcycling --load "$WORK/dense" --save "$WORK/moe" \
  --save-interval 10 --metrics-file "$WORK/upcycled.jsonl"
grep -q "upcycled the dense checkpoint $WORK/dense/iter_0000002 .*: each MoE layer's 4 experts are 4 copies of its MLP in 1 slice, their weights scaled by 1$" \
  "$WORK/out.txt" || fail "no upcycling line: $(grep upcycled "$WORK/out.txt")"
grep -q "^Upcycled checkpoint saved to $WORK/moe$" "$WORK/out.txt" || fail "no 'Upcycled checkpoint saved' line"
grep -q "warning: --moe-use-upcycling: the dense checkpoint's optimizer state is not loaded" "$WORK/err.txt" ||
  fail "no --no-load-optim warning"
same_loss "$WORK/dense.jsonl" 3 "$WORK/upcycled.jsonl" 1 1e-6
# Iteration 1 is the upcycled model, weights only; the run's own last save is iteration 2.
[[ -d "$WORK/moe/iter_0000001" && $(cat "$WORK/moe/latest_checkpointed_iteration.txt") == 2 ]] ||
  fail "expected the upcycled iteration 1 and the run's iteration 2 in --save"
mkdir "$WORK/moe1" && cp -r "$WORK/moe/iter_0000001" "$WORK/moe1/" && echo 1 >"$WORK/moe1/latest_checkpointed_iteration.txt"
expect_status 1 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --moe-layer-freq "([0]+[1])*1" --train-iters 2 \
  --load "$WORK/moe1"
grep -q "holds no optimizer state" "$WORK/err.txt" || fail "the upcycled checkpoint holds optimizer state"
# Loaded without its optimizer state on one rank, the upcycled model resumes at the dense run's
# consumed samples: its iteration 2 sees the batch and weights of the upcycled run's iteration 1.
expect_status 0 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --moe-layer-freq "([0]+[1])*1" --train-iters 2 \
  --load "$WORK/moe1" --no-load-optim --metrics-file "$WORK/reloaded.jsonl"
same_loss "$WORK/upcycled.jsonl" 1 "$WORK/reloaded.jsonl" 2 1e-6
# The run's own checkpoint resumes without the flag.
expect_status 0 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --moe-layer-freq "([0]+[1])*1" --train-iters 3 \
  --override-opt_param-scheduler --load "$WORK/moe"
grep -q "successfully loaded checkpoint from $WORK/moe .* at iteration 2" "$WORK/out.txt" || fail "no resume from --save"

# Under tensor parallelism (TP=2 with sequence parallelism) each rank keeps its part of every expert.
expect_status 0 ranks 2 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --tensor-model-parallel-size 2 \
  --sequence-parallel --train-iters 2 --moe-use-upcycling --load "$WORK/dense" --save "$WORK/moe-tp2" \
  --save-interval 10 --metrics-file "$WORK/upcycled-tp2.jsonl"
same_loss "$WORK/dense.jsonl" 3 "$WORK/upcycled-tp2.jsonl" 1 1e-5

# Upcycling again into the same --save is refused: upcycling is for the converting run only.
expect_status 2 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --train-iters 2 --moe-use-upcycling \
  --load "$WORK/dense" --save "$WORK/moe" --save-interval 10
error_line "--moe-use-upcycling: --save $WORK/moe already holds a checkpoint"

# Granularity 2: experts of half the MLP (--ffn-hidden-size 24, the dense model's 48 / 2), 2 copies each.
expect_status 0 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --ffn-hidden-size 24 --moe-upcycling-granularity 2 \
  --train-iters 2 --moe-use-upcycling --load "$WORK/dense" --save "$WORK/moe-g2" --save-interval 10
grep -q "each MoE layer's 4 experts are 2 copies of its MLP in 2 slices, their weights scaled by 1.25992" \
  "$WORK/out.txt" || fail "no granularity-2 line: $(grep upcycled "$WORK/out.txt")"

# A dense MLP of another size than --ffn-hidden-size x --moe-upcycling-granularity.
expect_status 1 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --ffn-hidden-size 24 --train-iters 2 \
  --moe-use-upcycling --load "$WORK/dense" --save "$WORK/moe-bad" --save-interval 10
grep -q "has shape \[96, 32\], not \[48, 32\]: --moe-use-upcycling reads a dense MLP of --ffn-hidden-size (24) x --moe-upcycling-granularity (1)" \
  "$WORK/err.txt" || fail "no shape error: $(cat "$WORK/err.txt")"
# An MoE checkpoint is not a dense model's.
expect_status 1 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --train-iters 2 --moe-use-upcycling \
  --load "$WORK/moe" --save "$WORK/moe-again" --save-interval 10
grep -q "holds an MoE model (tensor 'model/decoder.layers.1.mlp.router.weight'); --moe-use-upcycling converts the checkpoint of a dense model" \
  "$WORK/err.txt" || fail "no MoE-checkpoint error: $(cat "$WORK/err.txt")"
# The upcycled model takes iteration 1 of --save: a run that would save iteration 1 itself is refused.
expect_status 2 "$BIN/mgt-train" "${DENSE[@]}" "${EXPERTS[@]}" --train-iters 2 --moe-use-upcycling \
  --load "$WORK/dense" --save "$WORK/moe-every" --save-interval 1
error_line "--moe-use-upcycling saves the upcycled model as iteration 1 of --save, as Megatron does, and this run would save its own iteration 1 there too (--save-interval 1)"
[[ ! -e "$WORK/moe-every/iter_0000001" ]] || fail "the refused run wrote a checkpoint"
echo "mgt_train_moe_upcycling: OK"
