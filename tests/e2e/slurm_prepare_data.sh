#!/usr/bin/env bash
# The Slurm data-preparation chain (slurm/prepare-data.sh → tokenize array → merge → index) run
# with stand-ins for sbatch and srun that execute jobs in submission order. Three shards merged
# must give the same dataset, byte for byte, as tokenizing the whole corpus in one run.
set -euo pipefail
bin_dir=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/fake"
cat > "$tmp/fake/srun" <<'SH'
#!/usr/bin/env bash
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
exec "$@"
SH
cat > "$tmp/fake/sbatch" <<'SH'
#!/usr/bin/env bash
# Runs the script now: once, or once per task of --array=A-B.
array=""
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in --array=*) array=${1#--array=} ;; esac
  shift
done
script=$1; shift
id=$(( $(cat "$FAKE_SLURM_IDS" 2>/dev/null || echo 100) + 1 )); echo "$id" > "$FAKE_SLURM_IDS"
if [[ -n $array ]]; then
  for ((t = ${array%-*}; t <= ${array#*-}; t++)); do
    SLURM_ARRAY_TASK_ID=$t SLURM_CPUS_PER_TASK=2 bash "$script" "$@" >&2 || exit 1
  done
else
  bash "$script" "$@" >&2 || exit 1
fi
echo "$id"
SH
chmod +x "$tmp/fake/srun" "$tmp/fake/sbatch"
export PATH="$tmp/fake:$PATH" MGT_BIN="$bin_dir" FAKE_SLURM_IDS="$tmp/ids"

corpus=$src/datasets/corpus-tinyshakespeare.jsonl
head -n 2000 "$corpus" > "$tmp/part0.jsonl"
sed -n '2001,4500p' "$corpus" | gzip > "$tmp/part1.jsonl.gz"
tail -n +4501 "$corpus" > "$tmp/part2.jsonl"
printf '%s\n' "$tmp/part0.jsonl" "$tmp/part1.jsonl.gz" "$tmp/part2.jsonl" > "$tmp/shards.txt"

tok="--tokenizer-type GPT2BPETokenizer --vocab-file $src/datasets/gpt2-vocab.json --merge-file $src/datasets/gpt2-merges.txt"
(cd "$tmp" && "$src/slurm/prepare-data.sh" shards.txt "$tmp/work" "$tmp/corpus" \
  "$tok --append-eod" \
  "--split 98,1,1 --seq-length 128 --train-iters 50 --global-batch-size 8 --eval-interval 25 --eval-iters 2 --data-cache-path $tmp/cache $tok") \
  > "$tmp/jobs.txt"
grep -q "tokenize=.* merge=.* index=" "$tmp/jobs.txt"

"$bin_dir/mgt-tokenize" --input "$corpus" --output-prefix "$tmp/whole" --append-eod --workers 2 $tok > /dev/null 2>&1
cmp "$tmp/whole_text_document.bin" "$tmp/corpus_text_document.bin"
cmp "$tmp/whole_text_document.idx" "$tmp/corpus_text_document.idx"
ls "$tmp/cache"/*-GPTDataset-train-shuffle_index.npy > /dev/null

# A requeued array task finds its shard complete and does not redo it.
SLURM_ARRAY_TASK_ID=0 bash "$src/slurm/tokenize-shards.sbatch" "$tmp/shards.txt" "$tmp/work" $tok 2>&1 | grep -q "already tokenized"
echo "slurm chain ok"
