#!/bin/bash
# Submit the whole workflow as one chain of Slurm jobs, each held until the previous one has
# succeeded (--dependency=afterok): tokenize (an array job, one task per shard) → merge → index →
# pretrain → convert (to Hugging Face) → eval (LAMBADA and WikiText-103). Prints the job ids as
# "tokenize=ID merge=ID index=ID pretrain=ID convert=ID eval=ID".
#
#   slurm/pipeline.sh [--dry-run] SHARD_LIST WORK_DIR [mgt-train flags...]
#
#   (mgt-train's flags are checked first, with mgt-train --dry-run from MGT_BIN or PATH: a bad
#   one stops the submission with exit status 2)
#   --dry-run    submit nothing; print the submissions as a shell script instead
#                (tokenize=$(sbatch ...), merge=$(sbatch --dependency=afterok:$tokenize ...), ...)
#   SHARD_LIST   the inputs, one per line (JSON lines; .gz, .zst or a glob), tokenized in parallel
#   WORK_DIR     everything the jobs write:
#                  tok/          the tokenized shards         data/corpus_text_document.bin/.idx
#                  index-cache/  the sample indices           ckpt/  checkpoints (--save = --load)
#                  hf/           the Hugging Face export      eval/  lambada.json, wikitext103.json
#                  logs/         one log per job (NAME-JOBID.out)   metrics.jsonl  training metrics
#   mgt-train flags  added after TRAIN_FLAGS (with TRAIN_FLAGS="" they are the whole model)
#
# Variables (environment; the defaults make a small GPT-2 run on the GPT-2 tokenizer):
#   TOKENIZER_FLAGS  tokenizer flags for mgt-tokenize, mgt-index and mgt-train
#                    (default: GPT2BPETokenizer with datasets/gpt2-vocab.json and gpt2-merges.txt)
#   DATA_FLAGS       the flags mgt-index and mgt-train must share for the training job to find
#                    the cached indices (default: --split 969,30,1 --seq-length 128
#                    --train-iters 200 --global-batch-size 8 --eval-interval 100 --eval-iters 5)
#   TRAIN_FLAGS      the rest of mgt-train's flags (default: 2 layers, hidden size 128, 4 heads,
#                    micro-batch 2, cosine decay from 1e-3, a checkpoint every 100 iterations)
#   NODES            training nodes (default 1)
#   TASKS_PER_NODE   training ranks per node, one per GPU (default 2)
#   GPUS_PER_TASK    GPUs per rank (default 1; 0 trains on CPU ranks and asks for no GPU)
#   LAMBADA          LAMBADA test set for eval (default datasets/lambada_test.jsonl)
#   WIKITEXT         WikiText-103 test tokens for eval (default datasets/wikitext-103.wiki.test.tokens)
#   SBATCH_FLAGS     extra sbatch flags for every job (--partition=..., --account=...)
#   TOKENIZE_SBATCH, MERGE_SBATCH, INDEX_SBATCH, PRETRAIN_SBATCH, CONVERT_SBATCH, EVAL_SBATCH
#                    extra sbatch flags for one job (--cpus-per-task=..., --time=...)
#   MGT_BIN, EXIT_SIGNAL, SAVER, ...  reach the jobs' templates unchanged (sbatch exports them)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
usage="usage: slurm/pipeline.sh [--dry-run] SHARD_LIST WORK_DIR [mgt-train flags...]"

dry_run=0
if [[ ${1:-} == --dry-run ]]; then
  dry_run=1
  shift
fi
if (( $# < 2 )); then
  echo "$usage" >&2
  exit 2
fi
shard_list=$1
work=$2
shift 2
[[ -r $shard_list ]] || { echo "pipeline.sh: cannot read the shard list $shard_list" >&2; exit 1; }
shards=$(grep -c . "$shard_list" || true)
(( shards > 0 )) || { echo "pipeline.sh: $shard_list lists no inputs" >&2; exit 1; }
# The jobs may start in another directory than this one: absolute paths only.
work=$(realpath -m "$work")
shard_list=$(realpath "$shard_list")

read -r -a tokenizer <<< "${TOKENIZER_FLAGS-"--tokenizer-type GPT2BPETokenizer --vocab-file $repo/datasets/gpt2-vocab.json --merge-file $repo/datasets/gpt2-merges.txt"}"
read -r -a data <<< "${DATA_FLAGS-"--split 969,30,1 --seq-length 128 --train-iters 200 --global-batch-size 8 --eval-interval 100 --eval-iters 5"}"
read -r -a train <<< "${TRAIN_FLAGS-"--num-layers 2 --hidden-size 128 --num-attention-heads 4 --max-position-embeddings 128 --micro-batch-size 2 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 20 --log-interval 10 --save-interval 100"}"
read -r -a all_jobs <<< "${SBATCH_FLAGS:-}"
lambada=${LAMBADA:-$repo/datasets/lambada_test.jsonl}
wikitext=${WIKITEXT:-$repo/datasets/wikitext-103.wiki.test.tokens}
gpus_per_task=${GPUS_PER_TASK:-1}

dataset=$work/data/corpus_text_document
cache=(--data-path "$dataset" --data-cache-path "$work/index-cache")
pretrain_resources=(--nodes="${NODES:-1}" --ntasks-per-node="${TASKS_PER_NODE:-2}")
# 0 overrides the template's --gpus-per-task=1: CPU ranks.
pretrain_resources+=(--gpus-per-task="$gpus_per_task")

# mgt-train's flags are checked here, before anything is submitted (or printed): a typo would
# otherwise fail the pretrain job only after tokenize, merge and index have run. --dry-run reads
# no data and checks the flags for the job's ranks; a model beyond this host's memory is no error.
mgt_train=${MGT_BIN:+$MGT_BIN/}mgt-train
if command -v "$mgt_train" > /dev/null; then
  if ! check=$("$mgt_train" --dry-run --world-size $(( ${NODES:-1} * ${TASKS_PER_NODE:-2} )) \
                 --save "$work/ckpt" --load "$work/ckpt" "${cache[@]}" "${data[@]}" "${tokenizer[@]}" \
                 "${train[@]}" --metrics-file "$work/metrics.jsonl" "$@" 2>&1 > /dev/null); then
    echo "pipeline.sh: the pretrain job's flags are refused: $(tail -n 1 <<< "$check")" >&2
    exit 2
  fi
else
  echo "pipeline.sh: warning: no $mgt_train here (set MGT_BIN): the training flags are checked only when the pretrain job starts" >&2
fi

# submit NAME EXTRA_FLAGS_VARIABLE AFTER sbatch-arguments...: submits one job, held until job
# AFTER (the NAME of an earlier one; empty for none) has succeeded, and sets the variable NAME to
# its id (sbatch --parsable prints ID or ID;CLUSTER). A dry run prints the submission as a line
# of shell instead: NAME=$(sbatch ...); NAME=${NAME%%;*}.
submit() {
  local name=$1 extra=$2 after=$3
  shift 3
  local -a flags=(--parsable "${all_jobs[@]}")
  local -a own
  read -r -a own <<< "${!extra:-}"
  flags+=("${own[@]}")
  if (( dry_run )); then
    local dependency=""
    [[ -n $after ]] && dependency=" --dependency=afterok:\$$after"
    echo "$name=\$(sbatch$(printf ' %q' "${flags[@]}")$dependency$(printf ' %q' "$@")); $name=\${$name%%;*}"
  else
    [[ -n $after ]] && flags+=(--dependency=afterok:"${!after}")
    local id
    id=$(sbatch "${flags[@]}" "$@")
    printf -v "$name" '%s' "${id%%;*}"
  fi
}

if (( dry_run )); then
  echo "set -e"
  echo "mkdir -p$(printf ' %q' "$work/logs" "$work/data")"
else
  mkdir -p "$work/logs" "$work/data"
fi
submit tokenize TOKENIZE_SBATCH "" --array=0-$((shards - 1)) --output="$work/logs/%x-%A_%a.out" \
  "$here/tokenize-shards.sbatch" "$shard_list" "$work/tok" "${tokenizer[@]}" --append-eod
submit merge MERGE_SBATCH tokenize --output="$work/logs/%x-%j.out" \
  "$here/merge.sbatch" "$work/tok" "$dataset"
submit index INDEX_SBATCH merge --output="$work/logs/%x-%j.out" \
  "$here/index.sbatch" "${cache[@]}" "${data[@]}" "${tokenizer[@]}"
submit pretrain PRETRAIN_SBATCH index "${pretrain_resources[@]}" --output="$work/logs/%x-%j.out" \
  "$here/pretrain.sbatch" "$work/ckpt" "${cache[@]}" "${data[@]}" "${tokenizer[@]}" "${train[@]}" \
  --metrics-file "$work/metrics.jsonl" "$@"
submit convert CONVERT_SBATCH pretrain --output="$work/logs/%x-%j.out" \
  "$here/convert.sbatch" "$work/ckpt" "$work/hf"
submit eval EVAL_SBATCH convert --output="$work/logs/%x-%j.out" \
  "$here/eval.sbatch" "$work/ckpt" "$work/eval" "$lambada" "$wikitext"
if (( dry_run )); then
  echo 'echo "tokenize=$tokenize merge=$merge index=$index pretrain=$pretrain convert=$convert eval=$eval"'
else
  echo "tokenize=$tokenize merge=$merge index=$index pretrain=$pretrain convert=$convert eval=$eval"
fi
