# Sourced by the MoE end-to-end scripts that check a feature against itself (after common.bash):
# `compare REFERENCE RUN BOUND`, every iteration's lm loss, auxiliary losses and grad norm within
# BOUND relative (0: equal), at least 8 iterations, the same ones in both. Not a test itself.
compare() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run = load(sys.argv[1]), load(sys.argv[2])
bound = float(sys.argv[3])
assert sorted(ref) == sorted(run) and len(ref) >= 8, (sorted(ref), sorted(run))
for k in sorted(ref):
    for field in ("lm_loss", "load_balancing_loss", "z_loss", "grad_norm"):
        a, b = ref[k][field], run[k][field]
        assert (a == b) if bound == 0 else abs(a - b) <= bound * abs(a), f"{k} {field}: {a!r} vs {b!r}"
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len(ref)} iterations agree")
PY
}
