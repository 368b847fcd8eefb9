#!/usr/bin/env bash
# On a GPU machine of 2 or 4 GPUs (4 are used where there are more), from the repository root,
# with .devpack/pack.tar.xz (or $MGT_DEVPACK) made by tools/gpu/pack.sh: mgt-train's ranks on a
# GPU each, communicating over NCCL. In one call:
#   tests    the NCCL tests of mgt-dist-tests ([nccl]), one rank per GPU;
#   layouts  the parallel layouts on the bundled corpus (datasets/corpus-gutenberg.jsonl, GPT-2
#            BPE) for 200 iterations against the one-GPU run, in fp32 and bf16: on 2 GPUs TP=2,
#            PP=2, DP=2, DP=2 with --use-distributed-optimizer (and with both its overlaps), TP=2
#            with --sequence-parallel; with
#            4 GPUs also TP=4, TP=2 x DP=2, TP=2 x PP=2, TP=2 SP x DP=2 with the distributed
#            optimizer and both overlaps, DP=4 (micro-batches of 2: the same global batch of 8)
#            with the distributed optimizer and both overlaps;
#            the largest relative lm-loss difference of
#            each (MGT_LAYOUTS="tp2-sp tp4 ..." picks some of them by name);
#   scaling  the 1.3B shape (24 layers, hidden 2048, 16 heads, seq 2048, bf16, micro-batch 4 per
#            replica) at DP=1 and, for N = 2 (and 4 where there are 4 GPUs), DP=N, DP=N with
#            --overlap-grad-reduce (and the same with --dp-collectives nccl: NCCL's kernels instead
#            of the copy engines), DP=N with the distributed optimizer and both overlaps, TP=2
#            with sequence parallelism (its collectives on the copy engines; x DP=N/2, and with 4
#            GPUs also with the distributed
#            optimizer and both overlaps), with its TP collectives' time by operation: tokens/s per
#            GPU, the scaling efficiency against DP=1, and the share of the data-parallel
#            reduction the overlap hides, from step times: (DP=N − overlapped) / (DP=N − DP=1),
#            and from CUDA events on the compute and communication streams (mgt-train's
#            data_parallel_comm_ms and data_parallel_comm_exposed_ms metrics)
#            (tools/bench/bench_train_gpu.py); the
#            overlapped DP=N once more with 8 micro-batches accumulated per step;
#   peer     PyTorch DDP of the same GPT-2-style model, compiled (tools/bench/ddp_peer_gpu.py), on
#            1 and N GPUs at the scaling section's shape and micro-batch, and with 8 micro-batches
#            per step;
#   profile  --profile's GPU time per operation on rank 0, one GPU against DP=N overlapped and
#            TP=2 with sequence parallelism, at the scaling section's shape: which operations
#            take longer beside the collectives (tools/gpu/profile_steady.py);
#   ckpt     (4 GPUs) TP=2 x DP=2 for 40 iterations in fp32, saving at iteration 20; that
#            checkpoint converted to TP=4 and to TP=1 (mgt-ckpt-convert) and resumed at TP=4 on 4
#            GPUs and at TP=1 on one: iterations 21-40 against the uninterrupted run;
# then a short table, last. Sections run in the order given, each row printed as it is known, so
# that a run cut short still reports what it finished. Logs under $OUT (or /tmp/multi-gpu), data
# under $MGT_WORK (or /tmp/multi-gpu-work).
#   tools/gpu/multi_gpu.sh [SECTION...]     sections: tests scaling peer layouts ckpt profile
#                                           (default: all but profile)
# MGT_MULTI_GPU_CPU=1 tries the script itself on a machine without GPUs: CPU ranks over MPI
# (MGT_GPUS of them, default 2), tiny shapes, MGT_MULTI_GPU_ITERS iterations (default 10), the
# programs of ${MGT_BUILD_DIR:-build}.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/multi-gpu}
work=${MGT_WORK:-/tmp/multi-gpu-work}
mkdir -p "$out" "$work"
sections=${*:-tests scaling peer layouts ckpt}
table=()
row() {
  table+=("$(printf '%-52s %s' "$1" "$2")")
  printf '%s\n' "${table[-1]}" >> "$out/summary.txt"
}
# Rows already formatted, one per line of standard input.
add_lines() {
  local line
  while IFS= read -r line; do
    table+=("$line")
    printf '%s\n' "$line" >> "$out/summary.txt"
  done
}
rm -f "$out/summary.txt"
# Every multi-GPU run: no NVLink multicast (NVLS), which these machines cannot use.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [ "${MGT_MULTI_GPU_CPU:-0}" = 1 ]; then
  build=$PWD/${MGT_BUILD_DIR:-build}
  bin=$build/bin
  dist_tests=$build/tests/mgt-dist-tests
  gpus=${MGT_GPUS:-2}
  launcher=$(command -v mpiexec.hydra || command -v mpiexec)
  py=python3
  device=cpu
  iters=${MGT_MULTI_GPU_ITERS:-10}
  size=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64)
  shape=tiny
  machine="$gpus CPU ranks (MGT_MULTI_GPU_CPU=1)"
  # One thread per rank, so that the ranks do not fight over the cores.
  export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1
else
  dp=${MGT_DEVPACK:-$PWD/.devpack}
  sp=/opt/torch/.venv/lib/python3.12/site-packages
  python3 -c "import tarfile,sys;tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$dp/pack.tar.xz" "$dp"
  export PATH=$dp/bin:$PATH UCX_MODULE_DIR=$dp/lib/ucx
  export LD_LIBRARY_PATH=$dp/lib:/usr/local/cuda/lib64:$sp/nvidia/nccl/lib:$sp/nvidia/cudnn/lib
  bin=$dp/bin
  dist_tests=$dp/bin/mgt-dist-tests
  gpus=${MGT_GPUS:-$(nvidia-smi -L | grep -c '^GPU ')}
  launcher=mpiexec.hydra
  py=/opt/torch/.venv/bin/python3
  [ -x "$py" ] || py=python3
  device=cuda
  iters=${MGT_MULTI_GPU_ITERS:-200}
  size=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 256)
  shape=gpt-1.3b
  machine="$gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
fi
if [ "$gpus" -ge 4 ]; then
  n=4
elif [ "$gpus" -ge 2 ]; then
  n=2
else
  echo "multi_gpu.sh: needs 2 or 4 GPUs, found ${gpus:-none}" >&2
  exit 1
fi
echo "machine: $machine; using $n"
# The data-parallel sizes measured: 2, and 4 where there are 4 GPUs (MGT_SCALING_RANKS="4" or
# "2" picks, so that one call's time limit holds a section's runs).
counts=(2)
[ "$n" -eq 4 ] && counts+=(4)
if [ -n "${MGT_SCALING_RANKS:-}" ]; then
  read -ra counts <<< "$MGT_SCALING_RANKS"
  for count in "${counts[@]}"; do
    [ "$count" -le "$n" ] || { echo "multi_gpu.sh: MGT_SCALING_RANKS asks for $count ranks, there are $n GPUs" >&2; exit 2; }
  done
fi
# ranks N COMMAND...: N ranks on this machine (hydra's fork launcher), or the command alone.
ranks() {
  local count=$1
  shift
  if [ "$count" -eq 1 ]; then "$@"; else "$launcher" -launcher fork -n "$count" "$@"; fi
}

# The communicators themselves, one rank per GPU.
section_tests() {
  ranks "$n" "$dist_tests" "[nccl]" > "$out/nccl-tests.log" 2>&1
  status=$?
  tail -n 5 "$out/nccl-tests.log"
  # Every rank prints Catch2's summary, sometimes on one line: the first one suffices.
  summary=$(grep -m1 -oE 'All tests passed \([0-9]+ assertions? in [0-9]+ test cases?\)|test cases: *[0-9]+ \|[^|]*(\|[^|]*)?|All tests passed' \
    "$out/nccl-tests.log")
  row "NCCL tests ([nccl]), $n ranks" "$([ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $summary"
}

# The bundled corpus, tokenized once, and the small model the layouts and the checkpoint train.
# The vocabulary (50,257 GPT-2 tokens) is padded to 50,432 in every layout: Megatron pads to a
# multiple of --make-vocab-size-divisible-by x TP, so TP=t takes 256/t, and every layout trains
# the same model.
data=$work/gutenberg
tokenizer=(--tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json
           --merge-file datasets/gpt2-merges.txt)
corpus_model() {  # corpus_model ITERS: sets model=(...) for runs of ITERS iterations
  [ -f "${data}_text_document.idx" ] ||
    "$bin/mgt-tokenize" --input datasets/corpus-gutenberg.jsonl --output-prefix "$data" --json-keys text \
      --append-eod --workers "$(nproc)" "${tokenizer[@]}" > "$out/tokenize.log" 2>&1 ||
    echo "mgt-tokenize failed: $(tail -2 "$out/tokenize.log")"
  model=("${tokenizer[@]}" "${size[@]}" --data-path "${data}_text_document" --split "969,30,1"
         --data-cache-path "$work/index-cache" --micro-batch-size 4 --global-batch-size 8 --lr 1e-3
         --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters $((($1 + 19) / 20)) --train-iters "$1" --log-interval 1
         --eval-iters 0 --seed 1234 --hidden-dropout 0 --attention-dropout 0 --device "$device")
}
train() {  # train DIR NAME RANKS TP FLAGS...: the run's metrics in DIR/NAME.jsonl, its log in DIR/NAME.log
  local dir=$1 name=$2 count=$3 tp=$4
  shift 4
  ranks "$count" "$bin/mgt-train" "${model[@]}" --make-vocab-size-divisible-by $((256 / tp)) "$@" \
    --metrics-file "$dir/$name.jsonl" > "$dir/$name.log" 2>&1 ||
    echo "$name: mgt-train failed: $(grep -m3 -iE 'error|mgt-train:' "$dir/$name.log" | head -3)"
}

# The layouts against one GPU.
section_layouts() {
  corpus_model "$iters"
  mkdir -p "$out/layouts"
  # NAME:RANKS:TP:FLAGS
  layouts=("tp2:2:2:--tensor-model-parallel-size 2"
           "pp2:2:1:--pipeline-model-parallel-size 2"
           "dp2:2:1:"
           "dp2-distopt:2:1:--use-distributed-optimizer"
           "dp2-distopt-overlap:2:1:--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"
           "tp2-sp:2:2:--tensor-model-parallel-size 2 --sequence-parallel")
  [ "$n" -eq 4 ] && layouts+=("tp4:4:4:--tensor-model-parallel-size 4"
                              "tp2-dp2:4:2:--tensor-model-parallel-size 2"
                              "tp2-pp2:4:2:--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"
                              "tp2-sp-dp2-distopt-overlap:4:2:--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"
                              "dp4-distopt-overlap:4:1:--micro-batch-size 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather")
  # MGT_LAYOUTS="tp2-sp tp4" runs just those (the one-GPU runs always).
  if [ -n "${MGT_LAYOUTS:-}" ]; then
    local picked=() layout
    for layout in "${layouts[@]}"; do
      [[ " $MGT_LAYOUTS " == *" ${layout%%:*} "* ]] && picked+=("$layout")
    done
    layouts=("${picked[@]}")
  fi
  rm -f "$out/layouts"/*.jsonl
  for precision in fp32 bf16; do
    extra=()
    [ $precision = bf16 ] && extra=(--bf16)
    train "$out/layouts" "one-$precision" 1 1 "${extra[@]}"
    for layout in "${layouts[@]}"; do
      IFS=: read -r name count tp flags <<< "$layout"
      # shellcheck disable=SC2086 # the layout's flags, split into words
      train "$out/layouts" "$name-$precision" "$count" "$tp" "${extra[@]}" $flags
      transport=$(grep -m1 -oE 'communication: [A-Za-z]+' "$out/layouts/$name-$precision.log" | cut -d' ' -f2)
      result=$("$py" tools/gpu/compare_losses.py "$out/layouts/one-$precision.jsonl" \
        "$out/layouts/$name-$precision.jsonl")
      echo "layout $name, $precision, $count ranks over ${transport:-?} vs 1 GPU: $result"
      row "$name $precision ($count ranks, ${transport:-?}) vs 1" "$result"
    done
  done
}

# Throughput of the 1.3B shape, per GPU, against one GPU.
section_scaling() {
  rm -f "$out/scaling.jsonl"
  bench() {
    "$py" tools/bench/bench_train_gpu.py --bin "$bin" --shape "$shape" --precision bf16 --micro-batch 4 \
      --iters 20 --no-peer --device "$device" --launcher "$launcher" --json "$out/scaling.jsonl" "$@" 2>&1 |
      tee -a "$out/scaling.log"
  }
  bench --ranks 1
  for count in "${counts[@]}"; do
    bench --ranks "$count"
    bench --ranks "$count" --overlap
    # The same with NCCL's kernels moving the gradients instead of the copy engines.
    bench --ranks "$count" --overlap --dp-collectives nccl
    bench --ranks "$count" --overlap --distributed-optimizer
    bench --ranks "$count" --tensor-parallel 2 --sequence-parallel
    # With data parallelism too, its reduction as in the fastest data-parallel row above.
    [ "$count" -gt 2 ] && bench --ranks "$count" --tensor-parallel 2 --sequence-parallel --overlap --distributed-optimizer
  done
  # A global batch of 8 micro-batches per replica (still small by Megatron's standards: 32 Ki
  # tokens per GPU): the reduction once per 8 backwards.
  bench --ranks 1 --accumulate 8
  for count in "${counts[@]}"; do
    bench --ranks "$count" --overlap --accumulate 8
  done
  add_lines < <("$py" - "$out/scaling.jsonl" <<'PY'
import json, sys
try:
    runs = [json.loads(line) for line in open(sys.argv[1])]
except OSError:
    runs = []
if not runs:
    print(f"{'throughput':52s} FAIL: no run finished (see scaling.log)")
def one_gpu(accumulate):
    return next((r for r in runs if r["ranks"] == 1 and r.get("accumulate", 1) == accumulate), None)
for r in runs:
    tp, n, k = r["tensor_parallel"], r["ranks"], r.get("accumulate", 1)
    name = "DP=1" if n == 1 else f"TP={tp}{' SP' if r['sequence_parallel'] else ''} x DP={n // tp}"
    name += " dist-opt" if r.get("distributed_optimizer") else ""
    name += " overlapped" if r.get("overlap") else ""
    name += ", NCCL kernels" if n > 1 and r.get("dp_collectives") == "nccl" else ""
    one = one_gpu(k)
    per_gpu = r["tokens_per_second_per_gpu"]
    efficiency = f", scaling efficiency {per_gpu / one['tokens_per_second_per_gpu']:.1%}" if one and n > 1 else ""
    transport = r["transport"].split(" ")[0].rstrip(",") if n > 1 else "one GPU"
    label = f"{r['shape']} bf16 mbs 4{f' x {k}' if k > 1 else ''}, {name} ({transport})"
    print(f"{label:52s} {per_gpu:.0f} tokens/s per GPU, MFU {r['mfu']:.1%}{efficiency}")
    if r.get("comm_ms"):
        print(f"{'  its DP collectives (CUDA events)':52s} {r['comm_ms']:.2f} ms per iteration, "
              f"{r['comm_exposed_ms']:.2f} ms waited for: {1 - r['comm_exposed_ms'] / r['comm_ms']:.0%} hidden")
    phases = r.get("phases_ms") or {}
    if phases and all(v is not None for v in phases.values()):
        print(f"{'  its step phases (CUDA events)':52s} " + ", ".join(f"{k} {v:.1f} ms" for k, v in phases.items()))
    if r.get("tp_comm_ms"):
        print(f"{'  its TP collectives (CUDA events)':52s} {r['tp_comm_ms']:.2f} ms per iteration, "
              f"{r.get('tp_comm_exposed_ms') or 0:.2f} ms of it on or waited for by the compute stream")
        for name, p in (r.get("tp_comm_by_operation") or {}).items():
            print(f"{'    ' + name:52s} {p['count']:.0f} per iteration, {p['ms']:.2f} ms, {p['exposed_ms']:.2f} ms waited for")
# Step time per token: DP=N spends (plain - one) on its reduction; the overlap hides what it saves.
def dp_run(n, overlap):
    return next((r for r in runs if r["ranks"] == n and r["tensor_parallel"] == 1 and r.get("accumulate", 1) == 1
                 and not r.get("distributed_optimizer") and bool(r.get("overlap")) == overlap
                 and r.get("dp_collectives", "copy-engines") == "copy-engines"), None)
one = one_gpu(1)
for n in sorted({r["ranks"] for r in runs if r["ranks"] > 1}):
    plain, over = dp_run(n, False), dp_run(n, True)
    if one and plain and over:
        t1, tp_, to = (1 / x["tokens_per_second_per_gpu"] for x in (one, plain, over))
        if tp_ > t1:
            print(f"{f'DP={n} communication hidden by the overlap':52s} {(tp_ - to) / (tp_ - t1):.0%} "
                  f"(exposed {(tp_ - t1) * 1e6:.2f} -> {(to - t1) * 1e6:.2f} us per token)")
PY
  )
}

# Where a parallel layout's step goes: the GPU time per operation on rank 0 for the 1.3B shape,
# one GPU against DP=N overlapped and TP=2 with sequence parallelism (halved for the comparison),
# in the steady state (iterations 5 to 14: --profile's step window). The collectives themselves
# are not backend operations: what the table shows is how much longer the compute takes beside
# them.
section_profile() {
  if [ "$device" != cuda ]; then
    row "profile (--profile)" "skipped (no GPUs)"
    return
  fi
  mkdir -p "$out/profile"
  local common=(--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
                --max-position-embeddings 2048 --micro-batch-size 4 --lr 3e-4 --eval-iters 0 --hidden-dropout 0
                --attention-dropout 0 --mock-data "${tokenizer[@]}" --bf16 --device cuda --train-iters 14
                --log-interval 14 --profile --profile-step-start 4 --profile-step-end 14)
  local replicas=${counts[0]} run name count batch flags
  # NAME:RANKS:GLOBAL_BATCH:FLAGS
  local runs=("one:1:4:" "dp$replicas-overlap:$replicas:$((4 * replicas)):--overlap-grad-reduce"
              "tp2-sp:2:4:--tensor-model-parallel-size 2 --sequence-parallel")
  for run in "${runs[@]}"; do
    IFS=: read -r name count batch flags <<< "$run"
    # shellcheck disable=SC2086 # the run's flags, split into words
    "$launcher" -launcher fork -prepend-rank -n "$count" "$bin/mgt-train" "${common[@]}" \
      --global-batch-size "$batch" $flags > "$out/profile/$name.log" 2>&1 ||
      echo "profile $name: mgt-train failed: $(tail -2 "$out/profile/$name.log")"
  done
  local steady
  for run in "dp$replicas-overlap:1" "tp2-sp:0.5"; do
    name=${run%:*}
    steady=$("$py" tools/gpu/profile_steady.py "$out/profile/$name.log" 10 --rank 0 \
      --against "$out/profile/one.log" --scale "${run#*:}" --top 12)
    printf '== %s against one GPU\n%s\n' "$name" "$steady"
    row "profile $name vs one GPU, rank 0" "$(echo "$steady" | sed -n '1,5p' | sed 's/^ *//' | tr -s ' ' | tr '\n' ';')"
  done
}

# The peer: PyTorch DDP of the compiled GPT-2-style model at the scaling section's shape.
section_peer() {
  if [ "$device" != cuda ]; then
    row "PyTorch DDP peer" "skipped (no GPUs)"
    return
  fi
  rm -f "$out/peer.jsonl"
  # As the scaling section: 1 and N GPUs, then 8 micro-batches per step on 1 and the most GPUs.
  for run in 1:1 "${counts[@]/%/:1}" 1:8 "${counts[-1]}:8"; do
    "$py" tools/bench/ddp_peer_gpu.py --gpus "${run%:*}" --accumulate "${run#*:}" --shape "$shape" --micro-batch 4 \
      --iters 20 --json "$out/peer.jsonl" >> "$out/peer.log" 2>&1 ||
      echo "ddp peer $run (GPUs:accumulation) failed: $(tail -3 "$out/peer.log")"
  done
  add_lines < <("$py" - "$out/peer.jsonl" <<'PY'
import json, sys
try:
    runs = [json.loads(line) for line in open(sys.argv[1])]
except OSError:
    runs = []
for r in runs:
    k = r.get("accumulate", 1)
    one = next((o for o in runs if o["gpus"] == 1 and o.get("accumulate", 1) == k), None)
    eff = f", scaling efficiency {r['tokens_per_second_per_gpu'] / one['tokens_per_second_per_gpu']:.1%}" if one and r["gpus"] > 1 else ""
    label = f"peer: torch {r['torch']} DDP, {r['shape']} mbs {r['micro_batch']}{f' x {k}' if k > 1 else ''}, {r['gpus']} GPU(s)"
    print(f"{label:52s} {r['tokens_per_second_per_gpu']:.0f} tokens/s per GPU, peak {r['peak_mib']:.0f} MiB{eff}")
if not runs:
    print(f"{'peer: PyTorch DDP':52s} FAIL: no run finished (see peer.log)")
PY
  )
}

# A checkpoint of TP=2 x DP=2, resharded to TP=4 and TP=1, continues the loss curve.
section_ckpt() {
  if [ "$n" -lt 4 ]; then
    row "checkpoint TP=2 x DP=2 -> TP=4 / TP=1" "skipped (needs 4 GPUs)"
    return
  fi
  local dir=$out/ckpt saves=$work/ckpt
  rm -rf "$dir" "$saves" && mkdir -p "$dir" "$saves"
  corpus_model 40
  train "$dir" tp2-dp2 4 2 --tensor-model-parallel-size 2 --save "$saves/tp2-dp2" --save-interval 20
  for tp in 4 1; do
    "$bin/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$saves/tp2-dp2/iter_0000020" \
      --save-dir "$saves/tp$tp" --target-tensor-parallel-size "$tp" > "$dir/convert-tp$tp.log" 2>&1 ||
      echo "conversion to TP=$tp failed: $(tail -2 "$dir/convert-tp$tp.log")"
  done
  train "$dir" resumed-tp4 4 4 --tensor-model-parallel-size 4 --load "$saves/tp4"
  train "$dir" resumed-tp1 1 1 --load "$saves/tp1"
  for run in resumed-tp4:4 resumed-tp1:1; do
    IFS=: read -r name count <<< "$run"
    result=$("$py" tools/gpu/compare_losses.py --from 21 "$dir/tp2-dp2.jsonl" "$dir/$name.jsonl")
    echo "checkpoint TP=2 x DP=2 at 20 -> ${name#resumed-} on $count: $result"
    row "ckpt TP2xDP2 -> ${name#resumed-} on $count, fp32, vs straight" "$result"
  done
}

for section in $sections; do
  case $section in
    tests|scaling|peer|layouts|ckpt|profile) "section_$section" ;;
    *) echo "multi_gpu.sh: unknown section $section (tests, scaling, peer, layouts, ckpt, profile)" >&2; exit 2 ;;
  esac
done

echo
echo "== summary ($machine, $n ranks) =="
printf '%s\n' "${table[@]}"
