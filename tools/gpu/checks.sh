#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devpack/pack.tar.xz (or $MGT_DEVPACK) made by
# tools/gpu/pack.sh:
# builds nothing; runs the CUDA tests, the CPU-vs-GPU training comparison and the training
# benchmark beside the PyTorch peer, logs under $OUT (or /tmp/gpu-checks), and prints a short
# table last.
#   tools/gpu/checks.sh [SECTION...]   sections: tests curve eval bench large parallel decode
#                                      decode-kernels profile kernels fp8 (default: all)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/gpu-checks}
mkdir -p "$out"
source tools/gpu/devpack_env.bash
table=()
row() { table+=("$(printf '%-44s %s' "$1" "$2")"); }
sections=${*:-tests curve eval bench large parallel decode decode-kernels profile kernels fp8}
want() { [[ " $sections " == *" $1 "* ]]; }

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "GPU: $gpu"

# 1. Every backend operation and the whole model against the CPU.
if want tests; then
start=$SECONDS
mgt-tests "[cuda]" --durations yes > "$out/cuda-tests.log" 2>&1
status=$?
tail -n 30 "$out/cuda-tests.log"
row "CUDA tests ([cuda])" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)") in $((SECONDS - start)) s; $(grep -E '^(All tests|test cases)' "$out/cuda-tests.log" | tail -1)"
# NCCL on one GPU (one rank): the communicators on the backend's stream and a training step over
# them against MPI staging; two processes sharing the GPU must be found sharing it.
mgt-dist-tests "[cuda]" > "$out/nccl-tests.log" 2>&1
status=$?
mpiexec.hydra -launcher fork -n 2 mgt-dist-tests "[cuda]" > "$out/nccl-tests-shared.log" 2>&1
shared=$?
tail -n 5 "$out/nccl-tests.log"
row "NCCL tests ([cuda] of mgt-dist-tests)" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); 2 ranks on one GPU $( [ $shared -eq 0 ] && echo pass || echo "FAIL ($shared)"); $(grep -E '^(All tests|test cases)' "$out/nccl-tests.log" | tail -1)"
fi

# 2. The same training run on the CPU and on the GPU: the loss curves must agree.
common=(--mock-data --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json
        --merge-file datasets/gpt2-merges.txt --num-layers 4 --hidden-size 256 --num-attention-heads 4
        --seq-length 256 --max-position-embeddings 256 --micro-batch-size 4 --global-batch-size 8
        --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 5 --train-iters 50
        --log-interval 1 --eval-iters 0 --seed 1234)
if want curve || want eval; then
rm -rf /tmp/gpu-checks-ckpt
for device in cpu cuda; do
  save=(); [ $device = cpu ] && save=(--save /tmp/gpu-checks-ckpt --save-interval 50)
  mgt-train "${common[@]}" "${save[@]}" --device $device --metrics-file "$out/curve-$device.jsonl" > "$out/curve-$device.log" 2>&1 ||
    echo "mgt-train --device $device failed: $(tail -3 "$out/curve-$device.log")"
done
grep -m1 "compute device" "$out/curve-cuda.log"
curve=$("$py" - "$out/curve-cpu.jsonl" "$out/curve-cuda.jsonl" <<'PY'
import json, sys
def losses(p):
    return [json.loads(l)["lm_loss"] for l in open(p) if '"event": "train"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if not a or len(a) != len(b):
    print(f"FAIL: {len(a)} vs {len(b)} logged iterations"); sys.exit()
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{len(a)} iterations, loss {a[0]:.4f} -> {a[-1]:.4f} (cpu) / {b[-1]:.4f} (gpu), max rel diff {rel:.2e}")
PY
)
echo "$curve"
row "loss curve, 4L-256H fp32, cpu vs cuda" "$curve"
fi

# 2b. Zero-shot evaluation of that checkpoint on the CPU and on the GPU (fp32, then bf16 GEMMs).
if want eval; then
head -n 1000 datasets/wikitext-103.wiki.test.tokens > /tmp/wikitext-103.wiki.test.head.tokens
for task in LAMBADA WIKITEXT103; do
  data=datasets/lambada_test.jsonl; [ $task = WIKITEXT103 ] && data=/tmp/wikitext-103.wiki.test.head.tokens
  for run in "cpu" "cuda" "cuda --bf16"; do
    tag=$(echo "$run" | tr -d ' -')
    mgt-eval --task $task --valid-data $data --load /tmp/gpu-checks-ckpt --micro-batch-size 16 --device $run \
      --output "$out/eval-$task-$tag.json" > "$out/eval-$task-$tag.log" 2>&1 || echo "mgt-eval $task $run failed: $(tail -2 "$out/eval-$task-$tag.log")"
  done
  verdict=$("$py" - "$out/eval-$task-cpu.json" "$out/eval-$task-cuda.json" "$out/eval-$task-cudabf16.json" <<'PY'
import json, sys
cpu, gpu, bf = (json.load(open(p)) for p in sys.argv[1:4])
def nums(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict): yield from nums(v, prefix + k + ".")
        elif isinstance(v, (int, float)) and not isinstance(v, bool): yield prefix + k, v
c, g, b = dict(nums(cpu)), dict(nums(gpu)), dict(nums(bf))
def worst(o):
    return max(((abs(o[k] - c[k]) / max(abs(c[k]), 1e-30), k) for k in c if k in o and c[k] != 0), default=(0, "-"))
w, k = worst(g); wb, kb = worst(b)
keys = [k for k in ("accuracy", "ppl", "adjusted_ppl", "correct") if k in c]
print(f"fp32 max rel diff {w:.1e} ({k}); bf16 {wb:.1e} ({kb}); " + ", ".join(f"{k} {c[k]:.6g}/{g[k]:.6g}/{b[k]:.6g}" for k in keys))
PY
)
  echo "$task: $verdict"
  row "mgt-eval $task cpu/cuda/cuda-bf16" "$verdict"
done
fi

# 3. Training throughput beside the PyTorch peer.
if want bench; then
  for spec in "fp32 8 --no-peer" "bf16 8" "bf16 16" "fp16 16"; do
    set -- $spec
    bench=$("$py" tools/bench/bench_train_gpu.py --bin "$dp/bin" --shape gpt2-124m --precision $1 --micro-batch $2 --iters 20 ${3:-} 2>&1 | tee -a "$out/bench.log")
    echo "$bench"
    row "gpt2-124m $1 mbs $2 mgt" "$(echo "$bench" | grep -m1 'mgt (' | sed 's/.*: mgt/mgt/')"
    [ -z "${3:-}" ] && row "gpt2-124m mbs $2 peer" "$(echo "$bench" | grep -m1 'peer (' | sed 's/.*: peer/peer/')"
  done
fi

# 3. The 1.3B shape (24 layers, hidden 2048, seq 2048) beside the peer, and where its step's GPU
# time goes per operation (iterations 3 to 6: --profile's step window).
if want large; then
  # One optimizer step per micro-batch, and per eight (the step's fixed costs spread as in training).
  for accumulate in 1 8; do
    bench=$("$py" tools/bench/bench_train_gpu.py --bin "$dp/bin" --shape gpt-1.3b --precision bf16 --micro-batch 4 \
      --iters 10 --accumulate $accumulate 2>&1 | tee -a "$out/bench-large.log")
    echo "$bench"
    row "gpt-1.3b bf16 mbs 4 x $accumulate mgt" "$(echo "$bench" | grep -m1 'mgt (' | sed 's/.*: mgt/mgt/')"
    row "gpt-1.3b mbs 4 x $accumulate peer" "$(echo "$bench" | grep -m1 'peer (' | sed 's/.*: peer/peer/')"
  done
  mgt-train --device cuda --bf16 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 4 --lr 3e-4 \
    --train-iters 6 --log-interval 6 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data \
    --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt \
    --profile --profile-step-start 2 --profile-step-end 6 \
    > "$out/profile-large.log" 2>&1
  grep -A14 "GPU time per operation" "$out/profile-large.log"
fi

# 3a. The parallel layouts as processes sharing the one GPU, against the one-process run.
if want parallel; then
  parallel=$(tools/gpu/parallel_one_gpu.sh "$out/parallel" 2>&1 | tee "$out/parallel.log")
  echo "$parallel"
  while read -r line; do
    row "$(echo "$line" | cut -d: -f1)" "$(echo "$line" | cut -d: -f2-)"
  done < <(echo "$parallel" | grep '^parallel on one GPU')
fi

# 3b. Decoding speed beside transformers' generate() on the same GPU.
if want decode; then
  decode=$("$py" tools/bench/bench_decode_gpu.py --bin "$dp/bin" 2>&1 | tee "$out/decode.log")
  echo "$decode"
  while read -r line; do
    row "$(echo "$line" | cut -d: -f1)" "$(echo "$line" | cut -d: -f2-)"
  done < <(echo "$decode" | grep '^decode batch')
  row "decode greedy agreement" "$(echo "$decode" | grep -m1 '^greedy' | cut -d: -f2)"
fi

# 3c. Where a decode step's GPU time goes, by kernel (Nsight Compute).
if want decode-kernels; then
  "$py" tools/bench/decode_kernels_gpu.py --bin "$dp/bin" 2>&1 | tee "$out/decode-kernels.log"
  while read -r line; do
    row "$(echo "$line" | cut -d: -f1)" "$(echo "$line" | cut -d: -f2-)"
  done < <(grep '^decode kernels' "$out/decode-kernels.log")
fi

# 4. Where a bf16 step's GPU time goes, per operation, at steady state: iterations 5 to 14
# profiled (--profile's step window), so that one-time costs (cuDNN plan builds, cuBLAS
# heuristics, pool growth) stay out, divided by 10.
if want profile; then
  mgt-train --device cuda --bf16 --num-layers 12 --hidden-size 768 --num-attention-heads 12 \
    --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8 --lr 3e-4 \
    --train-iters 14 --log-interval 14 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data \
    --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt \
    --profile --profile-step-start 4 --profile-step-end 14 > "$out/profile.log" 2>&1
  steady=$("$py" tools/gpu/profile_steady.py "$out/profile.log" 10)
  echo "$steady"
  row "profile, gpt2-124m bf16 mbs 8, per iteration" "$(echo "$steady" | sed -n '1,4p' | sed 's/^ *//' | tr -s ' ' | tr '\n' ';')"
fi

# 5. Pure GPU time per kernel (Nsight Compute, kernels serialised), against the step's wall time:
# what is left when the host issues work faster than the GPU runs it.
if want kernels; then
  iters=3
  ncu --csv --metrics gpu__time_duration.sum --print-units base \
    mgt-train --device cuda --bf16 --num-layers 12 --hidden-size 768 --num-attention-heads 12 \
    --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8 --lr 3e-4 \
    --train-iters $iters --log-interval 1 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --mock-data \
    --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt \
    > "$out/kernels.csv" 2> "$out/kernels.err"
  kernels=$("$py" - "$out/kernels.csv" $iters <<'PY'
import csv, re, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
name, value = head.index("Kernel Name"), head.index("Metric Value")
iters = int(sys.argv[2])
by = {}
for r in body:
    k = re.search(r"(\w+_kernel|nvjet\w*|cudnn\w*|\w+)\W*\(", r[name])
    k = k.group(1)[:60] if k else r[name][:60]
    t, n = by.get(k, (0.0, 0))
    by[k] = (t + float(r[value].replace(",", "")) / 1e6, n + 1)
total = sum(t for t, _ in by.values()) / iters
print(f"GPU kernel time per iteration (ncu, {iters} iterations averaged): {total:.2f} ms, {sum(n for _, n in by.values()) // iters} kernels")
for k, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:18]:
    print(f"  {k:60s} {t / iters:8.3f} ms {100 * t / iters / total:5.1f}% {n // iters:5d}")
PY
)
  echo "$kernels"
  row "ncu kernel time, gpt2-124m bf16 mbs 8" "$(echo "$kernels" | head -1)"
fi

# 6. FP8 (hybrid, delayed scaling with the amax history of Megatron's Llama 3 8B FP8 script)
# beside bf16: the FP8 operations against the CPU; throughput at 1.3B and 124M, by the log line
# and by wall clock (two runs of different lengths, start-up cancelling); a loss curve of each on
# the bundled Gutenberg corpus.
if want fp8; then
  mgt-tests "[fp8]" > "$out/fp8-tests.log" 2>&1
  status=$?
  row "FP8 tests ([fp8])" "$( [ $status -eq 0 ] && echo pass || echo "FAIL ($status)"); $(grep -E '^(All tests|test cases)' "$out/fp8-tests.log" | tail -1)"
  for spec in "gpt-1.3b 4 2048" "gpt2-124m 16 1024"; do
    read -r shape mbs seq <<<"$spec"
    for precision in bf16 fp8; do
      fp8=(); [ $precision = fp8 ] && fp8=(--fp8 hybrid)
      for iters in 20 60; do
        t0=$(date +%s.%N)
        "$py" tools/bench/bench_train_gpu.py --bin "$dp/bin" --shape $shape --micro-batch $mbs --iters $iters \
          --precision bf16 "${fp8[@]}" --no-peer > "$out/fp8-$shape-$precision-$iters.log" 2>&1 || tail -5 "$out/fp8-$shape-$precision-$iters.log"
        python3 -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$t0" > "$out/fp8-$shape-$precision-$iters.seconds"
      done
      wall=$(python3 -c "import sys; print(round(40 * $mbs * $seq / (float(sys.argv[1]) - float(sys.argv[2]))))" \
        "$(cat "$out/fp8-$shape-$precision-60.seconds")" "$(cat "$out/fp8-$shape-$precision-20.seconds")")
      head -1 "$out/fp8-$shape-$precision-60.log"
      row "$shape mbs $mbs $precision" "$(head -1 "$out/fp8-$shape-$precision-60.log" | grep -oE '[0-9]+ tokens/s, MFU [0-9.]+%, peak [0-9]+ MiB'); wall clock $wall tokens/s"
    done
  done
  mgt-tokenize --input datasets/corpus-gutenberg.jsonl --output-prefix /tmp/gutenberg --tokenizer-type GPT2BPETokenizer \
    --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt --append-eod --quiet > /dev/null 2>&1
  curve=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --max-position-embeddings 1024
         --micro-batch-size 8 --global-batch-size 8 --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 100
         --train-iters 1000 --log-interval 50 --eval-iters 0 --data-path /tmp/gutenberg_text_document --split 100,0,0
         --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json --merge-file datasets/gpt2-merges.txt
         --data-cache-path /tmp/gutenberg-cache --bf16 --device cuda)
  mgt-train "${curve[@]}" --metrics-file "$out/fp8-curve-bf16.jsonl" > "$out/fp8-curve-bf16.log" 2>&1
  mgt-train "${curve[@]}" --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max \
    --metrics-file "$out/fp8-curve-fp8.jsonl" > "$out/fp8-curve-fp8.log" 2>&1 || tail -5 "$out/fp8-curve-fp8.log"
  curve=$("$py" - "$out/fp8-curve-bf16.jsonl" "$out/fp8-curve-fp8.jsonl" <<'PY'
import json, sys
def losses(p):
    return {j["iteration"]: j["lm_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
after = [i for i in sorted(a) if i > 100 and i in b]
rel = max(abs(a[i] - b[i]) / a[i] for i in after) if after else float("nan")
print(f"{len(after)} logged iterations after warm-up, loss {a[max(a)]:.4f} (bf16) / {b.get(max(a), float('nan')):.4f} (fp8) at {max(a)}, max rel diff {rel:.2%}")
PY
)
  echo "$curve"
  row "gpt2-124m gutenberg 1000 it, fp8 vs bf16" "$curve"
fi

echo
echo "== summary ($gpu) =="
printf '%s\n' "${table[@]}"
