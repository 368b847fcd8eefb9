#!/usr/bin/env bash
# End-to-end checks of mgt-train across ranks (mpiexec, CPU backend): data parallelism, plain and
# with --use-distributed-optimizer, reproduces the one-rank run's losses (train and validation,
# every iteration, within 1e-5 relative) for a GPT-2-style model (learned positions, LayerNorm,
# GELU, biases, tied embeddings, dropout) and a Llama-style one (rotary, RMSNorm, SwiGLU,
# grouped-query attention, untied, no biases); a DP=2 checkpoint resumes exactly on DP=2 and
# continues the one-rank run on one rank; --fp16's power-of-two loss scales change no bit at
# DP=2, plain or sharded; DP=4 on 4 ranks (the machine as two simulated nodes); the line of
# nodes the launcher reports; each of Megatron's lines is printed once, the
# iteration and validation lines by the last rank (print_rank_last), the others by rank 0;
# failures and usage errors stop every rank. With --dataloader-type cyclic (no data sharding) DP=2
# agrees with one rank, and a sharded run resumes bit for bit.
# Usage: bash tests/e2e/mgt_train_data_parallel.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

MPIEXEC="$(command -v mpiexec)" || fail "no mpiexec"
LAUNCHER=()
# Hydra's fork launcher keeps the ranks on this machine even inside a Slurm allocation.
if "$MPIEXEC" --version 2>/dev/null | grep -q HYDRA; then LAUNCHER=(-launcher fork); fi
# One thread per rank (2 cores); the one-rank references use the same, so each GEMM is the same.
export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1
# ranks N command...: N ranks, kept from an enclosing allocation's task count.
ranks() {
  local n=$1; shift
  env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_STEP_NUM_TASKS "$MPIEXEC" -n "$n" "${LAUNCHER[@]}" "$@"
}

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
  --vocab-size 127 --append-eod --quiet >/dev/null 2>&1

# Global batch 8 = micro-batch 2 x 4 micro-batches on one rank, x 2 on each of 2, x 1 on each of 4.
COMMON=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
        --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine
        --lr-warmup-iters 2 --tokenizer-type NullTokenizer --vocab-size 127
        --data-path "$WORK/pat_text_document" --split 90,5,5 --data-cache-path "$WORK/cache"
        --train-iters 20 --log-interval 1 --eval-interval 10 --eval-iters 2)
GPT2=("${COMMON[@]}")
LLAMA=("${COMMON[@]}" --position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention
       --num-query-groups 2 --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0
       --attention-dropout 0)

# compare REFERENCE RUN [exact]: the same logged iterations and evaluations; lm loss within 1e-5
# relative and grad norm within 1e-4 (the sums run in another order), or bit for bit with "exact".
# Prints the largest relative differences.
compare() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):  # keyed by (event, iteration, n): the last iteration has two validations
    records = {}
    for j in map(json.loads, open(path)):
        n = sum(k[:2] == (j["event"], j["iteration"]) for k in records)
        records[(j["event"], j["iteration"], n)] = j
    return records
ref, run = load(sys.argv[1]), load(sys.argv[2])
exact = len(sys.argv) > 3
keys = [k for k in run if k in ref] if exact else sorted(ref)
assert exact or sorted(run) == keys, f"logged {sorted(run)}, expected {keys}"
assert sum(k[0] == "train" for k in keys) >= 10, keys
worst = {"lm_loss": 0.0, "grad_norm": 0.0}
for k in keys:
    for field, bound in (("lm_loss", 1e-5), ("grad_norm", 1e-4)):
        if field not in ref[k]:
            continue
        a, b = ref[k][field], run[k][field]
        rel = abs(a - b) / abs(a)
        worst[field] = max(worst[field], rel)
        assert (a == b) if exact else rel <= bound, f"{k} {field}: {a!r} vs {b!r} (relative {rel:.3g})"
    if k[0] == "train":
        assert ref[k]["consumed_samples"] == run[k]["consumed_samples"], k
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len(keys)} records, largest relative difference "
      f"lm loss {worst['lm_loss']:.2e}, grad norm {worst['grad_norm']:.2e}")
PY
}

for model in GPT2 LLAMA; do
  declare -n FLAGS="$model"
  expect_status 0 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/$model-1.jsonl"
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --metrics-file "$WORK/$model-dp2.jsonl"
  # Megatron's lines, once each.
  [[ "$(grep -c '] iteration ' "$WORK/out.txt")" == 20 ]] || fail "$model DP=2: not one line per iteration"
  grep -q '^using world size: 2, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1$' \
    "$WORK/out.txt" || fail "$model DP=2: no layout line"
  grep -q '^> data-parallel groups: \[0, 1\] (mpi)$' "$WORK/out.txt" || fail "$model DP=2: no group line"
  grep -q "^\[rank 0/2\] > nodes: 1 (MPI's shared-memory split), node of each rank: 0 0$" "$WORK/err.txt" ||
    fail "$model DP=2: no line of nodes: $(grep 'nodes' "$WORK/err.txt")"
  [[ "$(grep -c 'communication: ' "$WORK/err.txt")" == 1 ]] &&
    grep -q "^\[rank 0/2\] > communication: MPI (the CPU backend's buffers are host memory)$" "$WORK/err.txt" ||
    fail "$model DP=2: not one line naming the transport: $(grep 'communication' "$WORK/err.txt")"
  [[ "$(grep -c 'validation loss at iteration 10 |' "$WORK/out.txt")" == 1 ]] || fail "$model DP=2: validation"
  compare "$WORK/$model-1.jsonl" "$WORK/$model-dp2.jsonl"
  if [[ $model == GPT2 && ${#LAUNCHER[@]} -gt 0 ]]; then
    # Which rank printed which line: hydra's -prepend-rank marks each line "[RANK] ".
    expect_status 0 env -u SLURM_NTASKS -u SLURM_NPROCS "$MPIEXEC" -n 2 "${LAUNCHER[@]}" -prepend-rank \
      "$BIN/mgt-train" "${FLAGS[@]}" --train-iters 10
    grep -q '^\[1\]  \[.*\] iteration       10/      10 |' "$WORK/out.txt" || fail "iteration line not from the last rank"
    grep -q '^\[1\]  validation loss at iteration 10 |' "$WORK/out.txt" || fail "validation not from the last rank"
    grep -q '^\[0\] using world size: 2' "$WORK/out.txt" || fail "layout line not from rank 0"
    ! grep -q '^\[0\].* iteration ' "$WORK/out.txt" || fail "rank 0 printed an iteration line"
  fi
  # --overlap-* (one bucket at the default --ddp-bucket-size) change nothing; nor does --distributed-backend
  # on CPU ranks.
  expect_status 0 ranks 2 "$BIN/mgt-train" "${FLAGS[@]}" --use-distributed-optimizer --overlap-grad-reduce \
    --overlap-param-gather --distributed-backend gloo --metrics-file "$WORK/$model-dp2-distopt.jsonl"
  grep -q '^> distributed optimizer: each data-parallel rank keeps ' "$WORK/out.txt" || fail "no sharding line"
  compare "$WORK/$model-1.jsonl" "$WORK/$model-dp2-distopt.jsonl"
done

# DP=4 on 4 ranks, one micro-batch each, the machine standing for two nodes (--simulated-nodes:
# nothing changes over MPI but the line of nodes).
expect_status 0 ranks 4 "$BIN/mgt-train" "${GPT2[@]}" --simulated-nodes 2 --metrics-file "$WORK/GPT2-dp4.jsonl"
grep -q "^\[rank 0/4\] > nodes: 2 (MPI's shared-memory split, --simulated-nodes 2), node of each rank: 0 0 1 1$" \
  "$WORK/err.txt" || fail "DP=4 on 2 simulated nodes: $(grep 'nodes' "$WORK/err.txt")"
compare "$WORK/GPT2-1.jsonl" "$WORK/GPT2-dp4.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${LLAMA[@]}" --use-distributed-optimizer \
  --metrics-file "$WORK/LLAMA-dp4-distopt.jsonl"
compare "$WORK/LLAMA-1.jsonl" "$WORK/LLAMA-dp4-distopt.jsonl"

# Save on DP=2 with the distributed optimizer and stop at 10 (--exit-interval); rank 0 writes the
# weights, each data-parallel rank the optimizer state it owns.
CK="$WORK/ckpt"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --use-distributed-optimizer --save "$CK" --save-interval 5 \
  --exit-interval 10 --metrics-file "$WORK/first-half.jsonl"
[[ "$(cat "$CK/latest_checkpointed_iteration.txt")" == 10 ]] || fail "tracker does not say 10"
[[ "$(ls "$CK/iter_0000010" | tr '\n' ' ')" == "mp_rank_00.h5 mp_rank_00_dp_000.h5 mp_rank_00_dp_001.h5 " ]] ||
  fail "iter_0000010: not the weights plus one optimizer shard per data-parallel rank"
compare "$WORK/GPT2-dp2-distopt.jsonl" "$WORK/first-half.jsonl" exact
cp -r "$CK" "$WORK/ckpt-copy"
# Resumed on the same layout: the uninterrupted run, bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --use-distributed-optimizer --save "$CK" --save-interval 5 \
  --load "$CK" --metrics-file "$WORK/second-half.jsonl"
grep -q "successfully loaded checkpoint from $CK \[ t 1/1, p 1/1 \] at iteration 10" "$WORK/out.txt" ||
  fail "DP=2 resume not reported"
grep -q '] iteration       11/      20 | consumed samples:           88 |' "$WORK/out.txt" ||
  fail "DP=2 resume does not continue at iteration 11 with 88 samples consumed"
compare "$WORK/GPT2-dp2-distopt.jsonl" "$WORK/second-half.jsonl" exact
# --fp16's loss scaling over DP=2, plain and with the distributed optimizer (each rank unscales
# its shard): a power-of-two scale, constant or dynamic (2^32, which fp32 does not overflow
# here), changes no bit of the fp32 run.
for scaling in constant dynamic; do
  scale_flags=(--fp16)
  [[ $scaling == constant ]] && scale_flags+=(--loss-scale 4096)
  for optimizer in plain distopt; do
    extra=()
    reference="$WORK/GPT2-dp2.jsonl"
    [[ $optimizer == distopt ]] && extra=(--use-distributed-optimizer) && reference="$WORK/GPT2-dp2-distopt.jsonl"
    expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" "${extra[@]}" "${scale_flags[@]}" \
      --metrics-file "$WORK/fp16-$scaling-$optimizer.jsonl"
    compare "$reference" "$WORK/fp16-$scaling-$optimizer.jsonl" exact
  done
done
grep -q '"loss_scale": 4096.0,' "$WORK/fp16-constant-plain.jsonl" || fail "--loss-scale 4096 not logged"
grep -q '"loss_scale": 4294967296.0,' "$WORK/fp16-dynamic-distopt.jsonl" || fail "dynamic loss scale not logged"
# The checkpoint does not depend on the layout: one rank, plain optimizer, continues too.
expect_status 0 "$BIN/mgt-train" "${GPT2[@]}" --save "$WORK/ckpt-copy" --save-interval 5 --load "$WORK/ckpt-copy" \
  --metrics-file "$WORK/second-half-1.jsonl"
python3 - "$WORK/GPT2-1.jsonl" "$WORK/second-half-1.jsonl" <<'PY' || fail "one-rank resume of a DP=2 checkpoint"
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
run = [json.loads(l) for l in open(sys.argv[2])]
# The one-rank run's records from iteration 11 on, in order.
ref = ref[next(i for i, j in enumerate(ref) if j["event"] == "train" and j["iteration"] == 11):]
assert [(j["event"], j["iteration"]) for j in run] == [(j["event"], j["iteration"]) for j in ref], run
for a, b in zip(ref, run):
    assert abs(a["lm_loss"] - b["lm_loss"]) <= 1e-5 * abs(a["lm_loss"]), (a, b)
PY

# Rank 0 alone takes the save directory's lock: held elsewhere, every rank stops at once (the
# other ranks learn it from rank 0 rather than waiting in their next collective).
mkdir "$WORK/busy"
(exec 9>"$WORK/busy/.mgt-writer.lock" && flock -n 9 && exec sleep 600) >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do [[ -e "$WORK/busy/.mgt-writer.lock" ]] && break; sleep 0.1; done
expect_status 1 timeout 120 "$MPIEXEC" -n 2 "${LAUNCHER[@]}" "$BIN/mgt-train" "${GPT2[@]}" --save "$WORK/busy" \
  --save-interval 5
grep -q "is being written by another process" "$WORK/err.txt" || fail "lock refusal not reported"
grep -q "^mgt-train: locking the save directory failed on rank 0 (its message says why); every rank stops$" \
  "$WORK/err.txt" || fail "rank 1 not told why it stops"
kill "$holder"
wait "$holder" 2>/dev/null || true

# --dataloader-type cyclic (each epoch in a random order, Megatron's random sampler): without data
# sharding the ranks share one order, so DP=2 reads the one-rank run's training batches (each
# global batch the same samples, in other micro-batches: the Llama-style model, without dropout,
# whose masks follow the micro-batches) and agrees with it; the small validation and test splits
# wrap into epochs of other lengths (an epoch is a whole number of micro-batches of every rank, as
# in Megatron). With sharding (Megatron's default) each rank shuffles its own half, and a DP=2 run
# stopped at 10 and resumed reads what the uninterrupted one read, bit for bit.
expect_status 0 "$BIN/mgt-train" "${LLAMA[@]}" --dataloader-type cyclic --no-data-sharding \
  --metrics-file "$WORK/cyclic-1.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${LLAMA[@]}" --dataloader-type cyclic --no-data-sharding \
  --metrics-file "$WORK/cyclic-dp2.jsonl"
python3 - "$WORK/cyclic-1.jsonl" "$WORK/cyclic-dp2.jsonl" "$WORK/LLAMA-1.jsonl" <<'PY' || fail "cyclic order"
import json, sys
def losses(path):
    return [j["lm_loss"] for j in map(json.loads, open(path)) if j["event"] == "train"]
one, dp2, single = map(losses, sys.argv[1:4])
assert len(one) == len(dp2) == 20, (len(one), len(dp2))
worst = max(abs(a - b) / abs(a) for a, b in zip(one, dp2))
assert worst <= 1e-5, worst
assert one != single, "the cyclic order gave the single order's losses"
print(f"cyclic, DP=2 against one rank: 20 iterations, largest relative lm loss difference {worst:.2e}")
PY
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --dataloader-type cyclic --metrics-file "$WORK/sharded.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --dataloader-type cyclic --save "$WORK/ck-cyclic" \
  --save-interval 10 --exit-interval 10
expect_status 0 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --dataloader-type cyclic --load "$WORK/ck-cyclic" \
  --metrics-file "$WORK/sharded-resumed.jsonl"
compare "$WORK/sharded.jsonl" "$WORK/sharded-resumed.jsonl" exact

# A usage error found on every rank is printed once, and the job exits 2.
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --global-batch-size 6
[[ "$(cat "$WORK/err.txt")" == "mgt-train: global batch size (6) is not divisible by micro batch size (2) times data parallel size (2)" ]] ||
  fail "usage error not printed once: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --distributed-backend tcp
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --distributed-backend: 'tcp' is not one of nccl, gloo, mpi" ]] ||
  fail "--distributed-backend tcp: $(cat "$WORK/err.txt")"
expect_status 2 ranks 2 "$BIN/mgt-train" "${GPT2[@]}" --simulated-nodes 3
[[ "$(cat "$WORK/err.txt")" == "mgt-train: --simulated-nodes 3: expected a positive divisor of the world size (2)" ]] ||
  fail "--simulated-nodes 3 on 2 ranks: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${GPT2[@]}" --overlap-param-gather
grep -q "^mgt-train: --overlap-param-gather needs --use-distributed-optimizer$" "$WORK/err.txt" ||
  fail "--overlap-param-gather without the distributed optimizer accepted"
echo "mgt-train data parallelism: all checks passed"
