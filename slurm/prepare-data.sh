#!/bin/bash
# Submit the whole data preparation as a chain of jobs: tokenize shards (array) → merge → index.
# Each job starts only if the previous one succeeded (afterok).
#
#   slurm/prepare-data.sh SHARD_LIST WORK_DIR OUTPUT_PREFIX "TOKENIZER FLAGS" "INDEX FLAGS"
#
#   slurm/prepare-data.sh shards.txt /scratch/tok /data/corpus \
#     "--tokenizer-type GPT2BPETokenizer --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt" \
#     "--split 969,30,1 --seq-length 2048 --train-iters 500000 --global-batch-size 512 --data-cache-path /data/index-cache
#      --tokenizer-type GPT2BPETokenizer --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt"
#
# The index flags repeat the tokenizer flags: the tokenizer is part of the index cache's
# description (and hash), exactly as in Megatron, so training finds the cache.
# The merged dataset is OUTPUT_PREFIX_text_document (key "text"; pass --json-keys in the
# tokenizer flags for another key and adjust). Prints the three job ids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shard_list=${1:?usage: prepare-data.sh SHARD_LIST WORK_DIR OUTPUT_PREFIX "TOKENIZER FLAGS" "INDEX FLAGS"}
work_dir=${2:?missing WORK_DIR}
output_prefix=${3:?missing OUTPUT_PREFIX}
read -r -a tokenizer_flags <<< "${4:?missing TOKENIZER FLAGS}"
read -r -a index_flags <<< "${5:-}"
shards=$(grep -c . "$shard_list")
[ "$shards" -gt 0 ] || { echo "$shard_list lists no inputs" >&2; exit 1; }

tokenize=$(sbatch --parsable --array=0-$((shards - 1)) "$here/tokenize-shards.sbatch" \
  "$shard_list" "$work_dir" "${tokenizer_flags[@]}")
merge=$(sbatch --parsable --dependency=afterok:"$tokenize" "$here/merge.sbatch" \
  "$work_dir" "${output_prefix}_text_document")
index=$(sbatch --parsable --dependency=afterok:"$merge" "$here/index.sbatch" \
  --data-path "${output_prefix}_text_document" "${index_flags[@]}")
echo "tokenize=$tokenize merge=$merge index=$index"
