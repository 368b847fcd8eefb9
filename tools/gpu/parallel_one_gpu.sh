#!/usr/bin/env bash
# On the GPU machine (called by checks.sh with the pack's programs on PATH): the parallel layouts
# as several processes sharing one GPU (NCCL refuses that, so mgt-train finds the shared device and
# keeps MPI, staging device buffers through host memory) against the one-process GPU run of the
# same model and data, in fp32 and with --bf16. Prints one line per layout: the largest relative
# lm-loss difference over 20 iterations, and the transport the ranks used. The
# vocabulary is padded to 50,304 for one and two tensor-parallel ranks alike (Megatron pads to a
# multiple of --make-vocab-size-divisible-by × TP), so every layout trains the same model.
#   tools/gpu/parallel_one_gpu.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
model=(--mock-data --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json
       --merge-file datasets/gpt2-merges.txt --make-vocab-size-divisible-by 64 --num-layers 4 --hidden-size 256 --num-attention-heads 4
       --seq-length 256 --max-position-embeddings 256 --micro-batch-size 4 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --train-iters 20
       --log-interval 1 --eval-iters 0 --seed 1234 --hidden-dropout 0 --attention-dropout 0
       --device cuda)
run() {  # run NAME RANKS FLAGS...
  local name=$1 n=$2; shift 2
  if [ "$n" -eq 1 ]; then
    mgt-train "${model[@]}" "$@" --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1
  else
    mpiexec.hydra -launcher fork -n "$n" mgt-train "${model[@]}" "$@" --metrics-file "$out/$name.jsonl" \
      > "$out/$name.log" 2>&1
  fi || echo "$name: mgt-train failed: $(grep -m3 -iE 'error|mgt-train:' "$out/$name.log" | head -3)"
}
compare() {  # compare REFERENCE RUN
  python3 tools/gpu/compare_losses.py "$out/$1.jsonl" "$out/$2.jsonl"
}
for precision in fp32 bf16; do
  extra=(); [ $precision = bf16 ] && extra=(--bf16)
  run "one-$precision" 1 "${extra[@]}"
  for layout in "tp2:2:--tensor-model-parallel-size 2" \
                "tp2-sp:2:--tensor-model-parallel-size 2 --sequence-parallel" \
                "pp2:2:--pipeline-model-parallel-size 2" \
                "dp2:2:" \
                "dp2-distopt:2:--use-distributed-optimizer" \
                "dp2-overlap:2:--overlap-grad-reduce --ddp-bucket-size 100000" \
                "dp2-distopt-overlap:2:--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 100000" \
                "tp2-pp2:4:--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"; do
    IFS=: read -r name n flags <<< "$layout"
    # shellcheck disable=SC2086
    run "$name-$precision" "$n" "${extra[@]}" $flags
    transport=$(grep -m1 -oE 'communication: [A-Z]+' "$out/$name-$precision.log" | cut -d' ' -f2)
    echo "parallel on one GPU, $precision, $name ($n processes, ${transport:-no transport line}) vs 1:" \
      "$(compare "one-$precision" "$name-$precision")"
  done
done
