#!/usr/bin/env bash
# End-to-end checks of --overlap-grad-reduce, --overlap-param-gather and --ddp-bucket-size
# (mpiexec, CPU backend): with buckets small enough that several are in flight at once, every
# layout — data parallelism on 2 and 4 ranks, plain and with --use-distributed-optimizer, with
# gradient accumulation over several micro-batches, tensor parallelism with sequence parallelism,
# pipeline parallelism with tied embeddings — logs the same losses, gradient norms and parameter
# norms, bit for bit, as without overlap, and saves the same weights; bad combinations are
# refused with one line.
# Usage: bash tests/e2e/mgt_train_overlap.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
# The launcher and the corpus.
source "$SRC/tests/e2e/lib/parallel_training.bash"

# Global batch 16 of micro-batches of 2: 4 micro-batches per rank on DP=2, 2 on DP=4. A layer
# holds about 50000 elements, so buckets of 10000 split every layer.
MODEL=(--num-layers 2 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine
       --lr-warmup-iters 2 --tokenizer-type NullTokenizer --vocab-size 127
       --data-path "$WORK/pat_text_document" --split 90,5,5 --data-cache-path "$WORK/cache"
       --train-iters 6 --log-interval 1 --eval-interval 3 --eval-iters 1 --log-params-norm)
LLAMA_STYLE=(--position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights
       --disable-bias-linear)
OVERLAP=(--overlap-grad-reduce --ddp-bucket-size 10000)

# same REFERENCE RUN: the same records, loss, gradient norm and parameter norm bit for bit.
same() {
  python3 - "$@" <<'PY'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
run = [json.loads(l) for l in open(sys.argv[2])]
assert len(ref) == len(run) and sum(j["event"] == "train" for j in ref) == 6, (len(ref), len(run))
for a, b in zip(ref, run):
    assert (a["event"], a["iteration"]) == (b["event"], b["iteration"]), (a, b)
    for field in ("lm_loss", "grad_norm", "params_norm"):
        assert a.get(field) == b.get(field), f"{a['event']} {a['iteration']} {field}: {a.get(field)!r} vs {b.get(field)!r}"
PY
}

# check NAME RANKS FLAGS...: the run (of hidden size $HIDDEN, default 64) with FLAGS and the one with FLAGS and --overlap-grad-reduce
# (plus --overlap-param-gather under the distributed optimizer) agree bit for bit, and so do the
# weights they save.
check() {
  local name=$1 n=$2; shift 2
  local extra=("${OVERLAP[@]}") model=("${MODEL[@]}" --hidden-size "${HIDDEN:-64}")
  [[ " $* " == *" --use-distributed-optimizer "* ]] && extra+=(--overlap-param-gather)
  expect_status 0 ranks "$n" "$BIN/mgt-train" "${model[@]}" "$@" --save "$WORK/$name-ref" --save-interval 6 \
    --metrics-file "$WORK/$name-ref.jsonl"
  expect_status 0 ranks "$n" "$BIN/mgt-train" "${model[@]}" "$@" "${extra[@]}" --save "$WORK/$name-overlap" \
    --save-interval 6 --metrics-file "$WORK/$name-overlap.jsonl"
  grep -q '^> overlapping the data-parallel ' "$WORK/out.txt" || fail "$name: no overlap line"
  local buckets
  buckets=$(sed -n 's/^> overlapping the data-parallel .*: \([0-9]*\) bucket(s) on rank 0 .*/\1/p' "$WORK/out.txt")
  (( buckets >= 4 )) || fail "$name: only ${buckets:-no} buckets"
  same "$WORK/$name-ref.jsonl" "$WORK/$name-overlap.jsonl" || fail "$name: overlap changed the run"
  for run in ref overlap; do
    expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$WORK/$name-$run" \
      --save-dir "$WORK/$name-$run-hf"
  done
  cmp "$WORK/$name-ref-hf/model.safetensors" "$WORK/$name-overlap-hf/model.safetensors" ||
    fail "$name: overlap changed the saved weights"
  echo "$name: bit for bit ($buckets buckets)"
}

check dp2 2
check dp2-distopt 2 --use-distributed-optimizer
check dp2-llama-distopt 2 "${LLAMA_STYLE[@]}" --use-distributed-optimizer
check dp4 4
check dp4-distopt 4 --use-distributed-optimizer
# Over 512 KiB of gradients, where MPICH's own reduce-scatter would change its order of summation
# between the whole buffer and the buckets (mpi_rank_order_reduce_scatter.hpp).
HIDDEN=128 check dp4-distopt-wide 4 --use-distributed-optimizer
# --grad-reduce-in-bf16: bucket by bucket as over the whole buffer, bit for bit (check), and near
# the fp32 reduction without being it.
check dp2-distopt-bf16-reduce 2 --use-distributed-optimizer --grad-reduce-in-bf16
python3 - "$WORK/dp2-distopt-ref.jsonl" "$WORK/dp2-distopt-bf16-reduce-ref.jsonl" <<'PY' ||
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
run = [json.loads(l) for l in open(sys.argv[2])]
pairs = [(a[f], b[f]) for a, b in zip(ref, run) if a["event"] == "train" for f in ("lm_loss", "grad_norm")]
worst = max(abs(x - y) / abs(x) for x, y in pairs)
assert 0 < worst <= 1e-3, f"largest relative difference {worst:.3g}"
print(f"--grad-reduce-in-bf16 against the fp32 reduction: largest relative difference {worst:.2e}")
PY
  fail "--grad-reduce-in-bf16 is not near the fp32 reduction, or is it"
check tp2-sp-dp2-distopt 4 --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer
check pp2-dp2 4 --pipeline-model-parallel-size 2
check pp2-dp2-distopt 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer

# Megatron's checks, one line each.
expect_status 2 "$BIN/mgt-train" "${MODEL[@]}" --hidden-size 64 --overlap-grad-reduce --overlap-param-gather
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --overlap-param-gather needs --use-distributed-optimizer" ]] ||
  fail "--overlap-param-gather without the distributed optimizer: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${MODEL[@]}" --hidden-size 64 --use-distributed-optimizer --overlap-param-gather
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --overlap-param-gather needs --overlap-grad-reduce" ]] ||
  fail "--overlap-param-gather without --overlap-grad-reduce: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${MODEL[@]}" --hidden-size 64 --overlap-grad-reduce --ddp-bucket-size 0
[[ "$(wc -l <"$WORK/err.txt")" == 1 ]] && grep -q -- "--ddp-bucket-size" "$WORK/err.txt" ||
  fail "--ddp-bucket-size 0: $(cat "$WORK/err.txt")"
echo "mgt-train overlapped communication: all checks passed"
