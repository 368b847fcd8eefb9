#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devpack/pack.tar.xz from tools/gpu/pack.sh:
# the FP8 and CUDA operation tests, then GPT 1.3B (micro-batch 4) in bf16 and in FP8 (hybrid,
# delayed scaling) by the benchmark's log line and by the wall clock of the log's time stamps (a
# 60-iteration run after one that builds the mock data's indices), the FP8 step's
# per-operation profile, and a short table last. Logs under $OUT (or /tmp/fp8-speed).
#   tools/gpu/fp8_speed.sh [--peer] [--curve] [--recipe] [--kernels] [--accumulate K] [--no-speed]
#     --accumulate K: bf16 and FP8 again with K micro-batches per optimizer step (how a model is
#       trained: the step's AdamW, gradient norm and FP8 weight casts spread over K micro-batches)
#     --peer: the PyTorch peer too (compiled), bf16 and torchao FP8
#     --curve: GPT 1.3B's loss curves in bf16 and FP8 over 300 iterations of the bundled corpus
#       (FP8 also with --fp8-recipe tensorwise; bf16 and FP8 also with another seed), and the
#       first iterations' gradient norms
#     --no-speed: neither the rates nor the profile (with --curve: the curves alone)
#     --variants "NAME=FLAGS;...": with --curve, instead of tensorwise and the second seed: FP8
#       curves with the delayed-scaling flags plus FLAGS, each compared with bf16's
#     --recipe: Megatron's Llama 3 8B FP8 script as written, sizes aside (tests/e2e), on the GPU
#     --kernels: the FP8 step's cast kernels timed one by one (Nsight Compute), where ncu runs
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/fp8-speed}
mkdir -p "$out"
source tools/gpu/devpack_env.bash
table=()
row() { table+=("$(printf '%-34s %s' "$1" "$2")"); echo "ROW ${table[-1]}"; }
peer=--no-peer; curve=0; recipe=0; kernels=0; accumulate=1; speed=1; variants=
while [ $# -gt 0 ]; do
  arg=$1; shift
  case $arg in
    --accumulate) accumulate=$1; shift ;;
    --peer) peer= ;;
    --curve) curve=1 ;;
    --recipe) recipe=1 ;;
    --kernels) kernels=1 ;;
    --no-speed) speed=0 ;;
    --variants) variants=$1; shift ;;
    *) echo "fp8_speed.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

mgt-tests "[fp8]" > "$out/fp8-tests.log" 2>&1
status=$?
row "FP8 tests ([fp8])" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/fp8-tests.log" | tail -1)"
mgt-tests "backend operations*" > "$out/op-tests.log" 2>&1
status=$?
row "every backend operation" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/op-tests.log" | tail -1)"
[ $status -eq 0 ] || grep -B5 -A10 FAILED "$out/op-tests.log" | head -60

if [ $speed = 1 ]; then
bench() {  # bench NAME ITERS [FLAGS...]: the benchmark's JSON in $out/NAME-ITERS.json
  local name=$1 iters=$2; shift 2
  "$py" tools/bench/bench_train_gpu.py --bin "$dp/bin" --shape gpt-1.3b --micro-batch 4 --iters "$iters" \
    --precision bf16 "$@" --json "$out/$name-$iters.json" > "$out/$name-$iters.log" 2>&1 || tail -5 "$out/$name-$iters.log"
}
for precision in bf16 fp8; do
  flags=(--no-peer); [ $precision = fp8 ] && flags=(--no-peer --fp8 hybrid)
  bench $precision 10 "${flags[@]}"  # builds the mock data's indices, warms the GPU
  bench $precision 60 "${flags[@]}"
  # The wall clock: the log lines' time stamps from the first logged iteration to the last (the
  # difference of two whole runs' times also counted start-ups that varied by seconds).
  wall=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['wall_tokens_per_second'] or 0))" \
    "$out/$precision-60.json" 2>/dev/null)
  head -1 "$out/$precision-60.log"
  row "gpt-1.3b mbs 4 $precision" "$(head -1 "$out/$precision-60.log" | grep -oE '[0-9]+ tokens/s, MFU [0-9.]+%, peak [0-9]+ MiB'); max allocated $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['max_allocated_mib']))" "$out/$precision-60.json" 2>/dev/null) MiB; wall clock $wall tokens/s"
done
if [ "$accumulate" -gt 1 ]; then
  for precision in bf16 fp8; do
    flags=(--no-peer --accumulate "$accumulate"); [ $precision = fp8 ] && flags+=(--fp8 hybrid)
    bench "$precision-acc$accumulate" 30 "${flags[@]}"
    wall=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['wall_tokens_per_second'] or 0))" \
      "$out/$precision-acc$accumulate-30.json" 2>/dev/null)
    row "gpt-1.3b mbs 4 x $accumulate $precision" "$(head -1 "$out/$precision-acc$accumulate-30.log" | grep -oE '[0-9]+ tokens/s, MFU [0-9.]+%'); wall clock $wall tokens/s"
  done
fi
if [ -z "$peer" ]; then
  # The PyTorch peer of the same model (compiled, DDP on one GPU) in bf16 and with torchao's FP8
  # training (tensorwise), in this call; torchao travels as a wheel in .whl.
  if [ -d .whl ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site
  fi
  for fp8 in none torchao; do
    extra=(); [ $fp8 = torchao ] && extra=(--fp8 torchao)
    "$py" tools/bench/ddp_peer_gpu.py --gpus 1 --shape gpt-1.3b --micro-batch 4 --iters 30 "${extra[@]}" \
      --json "$out/peer.jsonl" > "$out/peer-$fp8.log" 2>&1 || tail -5 "$out/peer-$fp8.log"
  done
  while read -r line; do
    row "peer $(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(j['fp8'] or 'bf16')" "$line")" \
      "$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(f\"{j['tokens_per_second']:.0f} tokens/s, max allocated {j['peak_mib']:.0f} MiB, torch {j['torch']}\")" "$line")"
  done < "$out/peer.jsonl"
fi

base=(--device cuda --bf16 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
      --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 4 --lr 3e-4
      --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data
      --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt)
model=("${base[@]}" --train-iters 14 --log-interval 14 --profile --profile-step-start 4 --profile-step-end 14)
mgt-train "${model[@]}" --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max \
  > "$out/profile-fp8.log" 2>&1 || tail -5 "$out/profile-fp8.log"
"$py" tools/gpu/profile_steady.py "$out/profile-fp8.log" 10 --top 25 | tee "$out/profile-fp8.txt"
row "profile, 1.3B FP8, per iteration" "$(sed -n 1p "$out/profile-fp8.txt")"

fi

if [ $kernels = 1 ]; then
  # Each cast kernel's time and DRAM bytes in iteration 3 (ncu serialises and replays kernels).
  timeout 120 ncu --clock-control none --kernel-name regex:'cast|column_sums|map' --launch-skip 400 --launch-count 80 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
    mgt-train "${base[@]}" --train-iters 3 --log-interval 1 --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max \
    > "$out/ncu.csv" 2> "$out/ncu.log" || tail -3 "$out/ncu.log"
  "$py" - "$out/ncu.csv" <<'PY' | tee "$out/ncu.txt"
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("ncu: no kernels measured"); sys.exit()
head, body = rows[0], rows[1:]
ki, mi, vi, ui = (head.index(k) for k in ("Kernel Name", "Metric Name", "Metric Value", "Metric Unit"))
scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
gi = head.index("Grid Size") if "Grid Size" in head else None
per = collections.defaultdict(dict)
for r in body:
    key = (r[head.index("ID")], r[ki][:60], r[gi] if gi is not None else "")
    per[key][r[mi]] = float(r[vi].replace(",", "")) * scale.get(r[ui], 1.0)
groups = collections.defaultdict(lambda: [0, 0.0, 0.0])  # launches, seconds, bytes per (kernel, grid)
for (i, name, grid), m in per.items():
    g = groups[(name, grid)]
    g[0] += 1
    g[1] += m.get("gpu__time_duration.sum", 0)
    g[2] += m.get("dram__bytes_read.sum", 0) + m.get("dram__bytes_write.sum", 0)
for (name, grid), (n, t, b) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
    print(f"{name[:48]:48s} {grid:16s} x{n:<3d} {t / n * 1e3:7.3f} ms {b / n / 1e6:8.1f} MB {b / t / 1e12 if t else 0:5.2f} TB/s")
PY
fi

if [ $curve = 1 ]; then
  # GPT 1.3B in bf16 and in FP8 on the bundled Gutenberg corpus: the FP8 curve within 1% of the
  # bf16 one at every logged iteration after warm-up.
  mgt-tokenize --input datasets/corpus-gutenberg.jsonl --output-prefix /tmp/gutenberg --tokenizer-type GPT2BPETokenizer \
    --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt --append-eod --quiet > "$out/tokenize.log" 2>&1 ||
    { echo "mgt-tokenize failed (is it in the pack?):"; tail -3 "$out/tokenize.log"; exit 1; }
  run=(--device cuda --bf16 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
       --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 4 --lr 2e-4 --min-lr 2e-5
       --lr-decay-style cosine --lr-warmup-iters 30 --train-iters 300 --log-interval 10 --eval-iters 0
       --data-path /tmp/gutenberg_text_document --split 100,0,0 --data-cache-path /tmp/gutenberg-cache
       --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt)
  fp8=(--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max)
  curve() {  # curve NAME [FLAGS...]: $out/curve-NAME.jsonl
    local name=$1; shift
    mgt-train "${run[@]}" "$@" --metrics-file "$out/curve-$name.jsonl" > "$out/curve-$name.log" 2>&1 ||
      tail -5 "$out/curve-$name.log"
  }
  curve bf16
  curve fp8 "${fp8[@]}"
  pairs=("bf16 fp8")
  if [ -n "$variants" ]; then
    IFS=';' read -ra specs <<< "$variants"
    for spec in "${specs[@]}"; do
      # shellcheck disable=SC2086
      curve "${spec%%=*}" "${fp8[@]}" ${spec#*=}
      pairs+=("bf16 ${spec%%=*}")
    done
  else
    curve fp8-tensorwise --fp8-format hybrid --fp8-recipe tensorwise
    curve bf16-seed1235 --seed 1235
    curve fp8-seed1235 "${fp8[@]}" --seed 1235
    pairs+=("bf16 fp8-tensorwise" "bf16-seed1235 fp8-seed1235" "bf16 bf16-seed1235" "fp8 fp8-seed1235")
  fi
  compare() {  # compare REFERENCE RUN: the largest relative difference after warm-up
    "$py" - "$out/curve-$1.jsonl" "$out/curve-$2.jsonl" <<'PY'
import json, sys
def losses(p):
    return {j["iteration"]: j["lm_loss"] for j in map(json.loads, open(p)) if j.get("event") == "train"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
after = [i for i in sorted(a) if i > 30 and i in b]
rel = {i: abs(a[i] - b[i]) / a[i] for i in after}
worst = max(rel, key=rel.get) if rel else 0
lower = sum(b[i] < a[i] for i in after)
print(f"{len(after)} logged after warm-up, max rel diff {rel.get(worst, float('nan')):.2%} at {worst}, "
      f"second lower at {lower}; at {max(a)} {a[max(a)]:.4f} / {b.get(max(a), float('nan')):.4f}")
PY
  }
  for pair in "${pairs[@]}"; do
    set -- $pair
    row "curve $1 / $2" "$(compare "$1" "$2")"
  done
  # The first iterations' gradient norms (the curves log means of ten).
  [ -n "$variants" ] || for name in bf16 fp8 fp8-tensorwise; do
    flags=(); [ $name = fp8 ] && flags=("${fp8[@]}"); [ $name = fp8-tensorwise ] && flags=(--fp8-format hybrid --fp8-recipe tensorwise)
    mgt-train "${run[@]}" "${flags[@]}" --exit-interval 3 --log-interval 1 \
      --metrics-file "$out/first-$name.jsonl" > "$out/first-$name.log" 2>&1 || tail -5 "$out/first-$name.log"
    row "grad norm, iterations 1-3, $name" "$("$py" -c "import json,sys; print(' / '.join(f\"{j['grad_norm']:.1f}\" for j in map(json.loads, open(sys.argv[1])) if j.get('event') == 'train'))" "$out/first-$name.jsonl")"
  done
fi

if [ $recipe = 1 ]; then
  # The e2e script launches with `mpiexec`: MPICH's, from the pack (the machine's own is OpenMPI's).
  mkdir -p /tmp/hydra && ln -sf "$dp/bin/mpiexec.hydra" /tmp/hydra/mpiexec && ln -sf "$dp/bin/hydra_pmi_proxy" /tmp/hydra/hydra_pmi_proxy
  PATH=/tmp/hydra:$PATH MGT_E2E_DEVICE=cuda bash tests/e2e/mgt_train_llama3_fp8_script.sh "$dp/bin" "$PWD" \
    > "$out/recipe.log" 2>&1
  status=$?
  row "Llama 3 8B FP8 script (sizes aside)" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)")"
  [ $status -eq 0 ] || tail -20 "$out/recipe.log"
fi

echo
printf '%s\n' "${table[@]}"
