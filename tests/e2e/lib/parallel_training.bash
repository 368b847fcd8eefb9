# Sourced by the tensor-parallel end-to-end scripts (after common.bash): the launcher, a small
# learnable corpus, the two model styles, and the comparison of loss curves. Not a test itself.

source "$(dirname "${BASH_SOURCE[0]}")/mpi_ranks.bash"

# Documents of integers walking t -> 5t + 3 + (i mod 3) mod 120: learnable within 20 steps.
python3 - "$WORK/corpus.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for d in range(400):
        t, toks = (d * 7) % 120, []
        for i in range(20 + (d * 37) % 90):
            toks.append(t)
            t = (5 * t + 3 + i % 3) % 120
        f.write(json.dumps({"text": " ".join(map(str, toks))}) + "\n")
PY
"$BIN/mgt-tokenize" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/pat" --tokenizer-type NullTokenizer \
  --vocab-size 127 --append-eod --quiet >/dev/null 2>&1 || fail "could not tokenize the corpus"

# Global batch 8 = micro-batch 4 x 2 micro-batches on one data-parallel rank, x 1 on each of 2.
# The vocabulary (127 + EOD) is padded to 128 for tensor-parallel sizes 1 and 2 alike
# (--make-vocab-size-divisible-by 64): the padding rows' logits take part in the softmax, so the
# layouts compared train the same model.
COMMON=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
        --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine
        --lr-warmup-iters 2 --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64
        --data-path "$WORK/pat_text_document" --split 90,5,5 --data-cache-path "$WORK/cache"
        --train-iters 20 --log-interval 1 --eval-interval 10 --eval-iters 2)
# Learned positions, LayerNorm, GELU, biases, tied embeddings, dropout.
GPT2=("${COMMON[@]}")
# Rotary, RMSNorm, SwiGLU, grouped-query attention, untied, no biases, no dropout.
LLAMA=("${COMMON[@]}" --position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention
       --num-query-groups 2 --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0
       --attention-dropout 0)

# compare_curves REFERENCE RUN MODE: the --metrics-file records of RUN against REFERENCE's.
#   same       the same records (>= 20 iterations); lm loss within 1e-5 relative, grad norm 1e-4
#   continues  RUN's records are REFERENCE's from RUN's first iteration on (>= 10 iterations),
#              within the same bounds: a resumed run continuing the curve
#   exact      as continues, bit for bit
# Prints the largest relative differences.
compare_curves() {
  python3 - "$@" <<'PY' || fail "$2 does not reproduce $1 ($3)"
import json, sys
def load(path):  # keyed by (event, iteration, n): the last iteration has two validations
    records = {}
    for j in map(json.loads, open(path)):
        n = sum(k[:2] == (j["event"], j["iteration"]) for k in records)
        records[(j["event"], j["iteration"], n)] = j
    return records
ref, run, mode = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
trains = [k for k in run if k[0] == "train"]
if mode == "same":
    assert sorted(run) == sorted(ref), f"logged {sorted(run)}, expected {sorted(ref)}"
    assert len(trains) >= 20, trains
else:
    first = min(k[1] for k in trains)
    expected = sorted(k for k in ref if k[1] >= first)
    assert sorted(run) == expected, f"logged {sorted(run)}, expected {expected}"
    assert len(trains) >= 10, trains
worst = {"lm_loss": 0.0, "grad_norm": 0.0}
for k in sorted(run):
    for field, bound in (("lm_loss", 1e-5), ("grad_norm", 1e-4)):
        if field not in ref[k]:
            continue
        a, b = ref[k][field], run[k][field]
        rel = abs(a - b) / abs(a)
        worst[field] = max(worst[field], rel)
        assert (a == b) if mode == "exact" else rel <= bound, f"{k} {field}: {a!r} vs {b!r} (relative {rel:.3g})"
    if k[0] == "train":
        assert ref[k]["consumed_samples"] == run[k]["consumed_samples"], k
print(f"{sys.argv[2].rsplit('/', 1)[-1]} vs {sys.argv[1].rsplit('/', 1)[-1]} ({mode}): {len(run)} records, "
      f"largest relative difference lm loss {worst['lm_loss']:.2e}, grad norm {worst['grad_norm']:.2e}")
PY
}
