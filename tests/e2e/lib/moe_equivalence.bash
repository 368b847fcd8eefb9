# Sourced by the MoE end-to-end scripts (after common.bash): the small MoE model they train and
# `compare REFERENCE RUN [FIRST]`, their check of a layout against the one-rank run. Not a test
# itself.

# --make-vocab-size-divisible-by 64: the vocabulary padded to 128 with TP=2 as with one rank.
MOE=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
     --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
     --mock-data --train-iters 20 --log-interval 1 --eval-iters 0
     --position-embedding-type rope --normalization RMSNorm --swiglu
     --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0 --attention-dropout 0
     --num-experts 8 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2
     --moe-z-loss-coeff 1e-3 --moe-ffn-hidden-size 48 --moe-layer-freq "([0]+[1])*1"
     --moe-shared-expert-intermediate-size 32 --moe-token-dispatcher-type alltoall
     --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64)

# compare REFERENCE RUN [FIRST]: lm loss, load_balancing_loss and z_loss within 1e-5 relative and
# the grad norm (and the params norm where both runs log it) within 1e-4 at every iteration of
# RUN (from FIRST on, at least 10 of them).
compare() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run = load(sys.argv[1]), load(sys.argv[2])
first = int(sys.argv[3]) if len(sys.argv) > 3 else 1
keys = sorted(k for k in ref if k >= first)
assert sorted(k for k in run if k >= first) == keys and len(keys) >= 10, (sorted(run), keys)
worst = {}
for k in keys:
    for field, bound in (("lm_loss", 1e-5), ("load_balancing_loss", 1e-5), ("z_loss", 1e-5), ("grad_norm", 1e-4),
                         ("params_norm", 1e-4)):
        if field == "params_norm" and (field not in ref[k] or field not in run[k]):
            continue
        if field not in ref[k] and field not in run[k]:  # a loss neither run takes
            continue
        a, b = ref[k][field], run[k][field]
        rel = abs(a - b) / abs(a)
        worst[field] = max(worst.get(field, 0.0), rel)
        assert rel <= bound, f"{k} {field}: {a!r} vs {b!r} (relative {rel:.3g})"
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len(keys)} iterations, largest relative differences "
      + ", ".join(f"{f} {v:.2e}" for f, v in worst.items()))
PY
}

# one_line MESSAGE: err.txt is that one line.
one_line() {
  [[ $(wc -l <"$WORK/err.txt") == 1 ]] && grep -qF -- "$1" "$WORK/err.txt" || fail "expected '$1', got: $(cat "$WORK/err.txt")"
}
