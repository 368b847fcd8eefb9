#!/usr/bin/env bash
# The Slurm templates on a real cluster started for the test (munged, slurmctld and slurmd from
# Debian's packages, configured in a scratch directory; tests/e2e/lib/slurm_cluster.bash), one
# node, and a second slurmd on the same host for the two-node job:
#   - slurm/pipeline.sh submits the whole chain on the bundled corpus split in three shards:
#     tokenize (array) → merge → index → pretrain (2 tasks, srun --mpi=pmi2: DP=2 on CPU ranks)
#     → convert (Hugging Face) → eval; every job completes and leaves its outputs;
#   - preemption: the training job, sent SIGUSR1 through its batch shell (scancel --batch, as
#     sbatch --signal=B:USR1@... does before a time limit), saves after the current iteration,
#     requeues itself and resumes from its checkpoint; its losses are those of an uninterrupted
#     run of the same job, bit for bit;
#   - preemption unannounced: another training job requeued from outside (scontrol requeue: the
#     ranks get SIGTERM) saves too, and ends with the same losses;
#   - two nodes: the uninterrupted training job once more with --nodes=2, one rank on each of
#     the host's two slurmd (their own node names): the ranks find two nodes (SLURM_NODEID and
#     MPI's shared-memory split) and end with the one-node run's losses, bit for bit;
#   - srun --mpi=pmix, where Slurm's PMIx plugin can load (libpmix installed), is refused with a
#     message naming --mpi=pmi2 (Debian's MPICH speaks PMI-2 only).
#   - a notice at the start: SIGUSR1 reaches the batch shell before srun has started (held back
#     here until the shell has said so) and is passed on only once the ranks hold it (their start
#     held back too, until the template is seen to wait): the job saves, requeues itself and
#     finishes with the losses of the uninterrupted run, where it used to die with status 138;
# Skips (exit 77, ctest's SKIP_RETURN_CODE), saying why, only where no cluster can be started
# (not root, packages missing). Stops every daemon it started, however it ends.
# Usage: bash tests/e2e/slurm_cluster.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
source "$src/tests/e2e/lib/slurm_cluster.bash"

if why=$(slurm_cluster_missing); then
  echo "SKIP: no Slurm cluster can be started here: $why"
  exit 77  # ctest: skipped (SKIP_RETURN_CODE), not passed
fi

cluster=$work/cluster
run=$work/run
mkdir -p "$cluster" "$run"
chmod 711 "$work"  # munged's socket lies below it: every directory on the way must be searchable
show_logs() {
  local f
  for f in "$run"/logs/*.out "$run"/*.out "$cluster"/log/slurmctld.log; do
    [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
  done
}
trap 'status=$?; (( status == 0 )) || show_logs; slurm_cluster_stop; rm -rf "$work"; exit $status' EXIT
# Killed (a ctest timeout, ^C): the daemons still go, through the EXIT trap.
trap 'exit 130' INT
trap 'exit 143' TERM HUP

cpus=$(nproc)
(( cpus >= 2 )) || cpus=2  # two single-CPU ranks; the node may claim more than it has
slurm_cluster_start "$cluster" "$cpus" || fail "the test cluster did not start"
echo "cluster up: $(sinfo -h -o '%P %D %c %t')"

export MGT_BIN=$bin
corpus=$src/datasets/corpus-tinyshakespeare.jsonl
head -n 2500 "$corpus" > "$run/part0.jsonl"
sed -n '2501,5000p' "$corpus" | gzip > "$run/part1.jsonl.gz"
tail -n +5001 "$corpus" > "$run/part2.jsonl"
printf '%s\n' "$run/part0.jsonl" "$run/part1.jsonl.gz" "$run/part2.jsonl" > "$run/shards.txt"
head -n 12 "$src/datasets/lambada_test.jsonl" > "$run/lambada.jsonl"
head -n 40 "$src/datasets/wikitext-103.wiki.test.tokens" > "$run/wiki.test.tokens"

# A small model (the GPT-2 vocabulary makes the output layer the largest part), an iteration
# logged each step, a regular save half way.
iters=30
export TOKENIZER_FLAGS="--tokenizer-type GPT2BPETokenizer --vocab-file $src/datasets/gpt2-vocab.json --merge-file $src/datasets/gpt2-merges.txt"
export DATA_FLAGS="--split 98,1,1 --seq-length 32 --train-iters $iters --global-batch-size 4 --eval-interval 15 --eval-iters 1"
export TRAIN_FLAGS="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --max-position-embeddings 32 --micro-batch-size 1 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 5 --log-interval 1 --save-interval 15 --device cpu"
export SBATCH_FLAGS="--cpus-per-task=1" GPUS_PER_TASK=0 TASKS_PER_NODE=2
export LAMBADA=$run/lambada.jsonl WIKITEXT=$run/wiki.test.tokens

# --dry-run submits nothing.
"$src/slurm/pipeline.sh" --dry-run "$run/shards.txt" "$run/w" > "$run/dry.txt"
[[ $(grep -c '^[a-z]*=$(sbatch ' "$run/dry.txt") == 6 ]] || fail "--dry-run did not print six sbatch commands"
[[ -z $(squeue -h -o %i) ]] || fail "--dry-run submitted jobs"

started=$SECONDS
"$src/slurm/pipeline.sh" "$run/shards.txt" "$run/w" > "$run/jobs.txt"
cat "$run/jobs.txt"
read -r -a pairs < "$run/jobs.txt"
declare -A job
for p in "${pairs[@]}"; do job[${p%%=*}]=${p#*=}; done
for name in tokenize merge index pretrain convert eval; do
  [[ ${job[$name]:-} =~ ^[0-9]+$ ]] || fail "no job id for $name in: $(cat "$run/jobs.txt")"
done

# wait_for_training METRICS JOB [JOB...]: until training has logged an iteration in METRICS;
# fails as soon as the training job (the first) has ended, or another has failed.
wait_for_training() {
  local metrics=$1 training=$2
  shift 2
  local deadline=$((SECONDS + 300)) id bad='JobState=(FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) '
  until [[ -s $metrics ]] && grep -q '"event": *"train"' "$metrics"; do
    (( SECONDS < deadline )) || fail "training logged no iteration in 300 s"
    if scontrol show job -o "$training" | grep -Eq "${bad/FAILED/COMPLETED|FAILED}"; then
      fail "training job $training ended before it was interrupted"
    fi
    for id in "$@"; do
      if scontrol show job -o "$id" | grep -Eq "$bad"; then
        fail "job $id failed: $(scontrol show job -o "$id" | head -n 1)"
      fi
    done
    sleep 0.1
  done
}
# release_requeued JOB: waits until JOB is back in the queue after its first run, and lets it
# start rather than wait out the delay Slurm gives a requeued job (its BeginTime, two minutes).
# slurmd refuses a job whose credential is from the second its previous run's was revoked in:
# the new start waits a little past that.
release_requeued() {
  local deadline=$((SECONDS + 120))
  until [[ $(slurm_job_field "$1" Restarts) == 1 && $(slurm_job_field "$1" JobState) == PENDING ]]; do
    (( SECONDS < deadline )) || fail "job $1 was not requeued"
    sleep 0.2
  done
  sleep 2
  scontrol update JobId="$1" StartTime=now
}

# Preemption announced: once training has logged an iteration, its batch shell gets SIGUSR1
# (what sbatch --signal=B:USR1@SECONDS does before the time limit); the job requeues itself.
metrics=$run/w/metrics.jsonl
wait_for_training "$metrics" "${job[pretrain]}" "${job[@]}"
scancel --batch --signal=USR1 "${job[pretrain]}"
release_requeued "${job[pretrain]}"
slurm_wait_gone 600 "${job[@]}" || fail "the pipeline did not finish"
echo "pipeline with a preempted training job: $((SECONDS - started)) s"

for name in tokenize merge index pretrain convert eval; do
  while read -r state code; do
    [[ $state == COMPLETED && $code == 0:0 ]] || fail "$name job ${job[$name]}: $state, exit code $code"
  done < <(scontrol show job -o "${job[$name]}" | sed -E 's/.* JobState=([A-Z_]+) .* ExitCode=([0-9:]+) .*/\1 \2/')
done
[[ $(scontrol show job -o "${job[tokenize]}" | grep -c JobState=COMPLETED) == 3 ]] ||
  fail "the tokenize array did not run three tasks"

# Every job's outputs. The three shards merged are the corpus tokenized whole.
ls "$run"/w/tok/shard_0000{0,1,2}_text_document.idx > /dev/null || fail "tokenize: shards missing"
read -r -a tok <<< "$TOKENIZER_FLAGS"
"$bin/mgt-tokenize" --input "$corpus" --output-prefix "$run/whole" --append-eod --workers 2 "${tok[@]}" \
  > /dev/null 2>&1
cmp "$run/whole_text_document.bin" "$run/w/data/corpus_text_document.bin" || fail "merge: .bin differs"
cmp "$run/whole_text_document.idx" "$run/w/data/corpus_text_document.idx" || fail "merge: .idx differs"
ls "$run"/w/index-cache/*-GPTDataset-train-shuffle_index.npy > /dev/null || fail "index: no cached indices"
[[ $(cat "$run/w/ckpt/latest_checkpointed_iteration.txt") == "$iters" ]] || fail "pretrain: not at iteration $iters"
log=$run/w/logs/mgt-pretrain-${job[pretrain]}.out
grep -q 'using world size: 2, data-parallel size: 2' "$log" || fail "pretrain: not two data-parallel ranks"
python3 - "$run/w" <<'PY' || fail "convert/eval outputs"
import json, os, sys
w = sys.argv[1]
config = json.load(open(os.path.join(w, "hf", "config.json")))
assert config["n_layer"] == 2 and config["n_embd"] == 32, config
assert os.path.getsize(os.path.join(w, "hf", "model.safetensors")) > 0
lam = json.load(open(os.path.join(w, "eval", "lambada.json")))
wiki = json.load(open(os.path.join(w, "eval", "wikitext103.json")))
assert lam["task"] == "LAMBADA" and lam["counts"]["examples"] == 12, lam
assert wiki["task"] == "WIKITEXT103" and wiki["ppl"] > 1, wiki
PY

# The preemption as the training log tells it: stopped on the signal, requeued, resumed.
grep -q 'restart count 0,' "$log" || fail "pretrain: first start not logged"
grep -q 'restart count 1,' "$log" || fail "pretrain: restart count 1 not logged"
grep -q 'exiting program after receiving SIGUSR1\.' "$log" || fail "pretrain: did not stop on SIGUSR1"
grep -q "requeueing job ${job[pretrain]}" "$log" || fail "pretrain: did not requeue itself"
resumed=$(sed -n 's/.*successfully loaded checkpoint from .* at iteration \([0-9]*\)$/\1/p' "$log")
if [[ -z $resumed ]] || (( resumed < 1 || resumed >= iters )); then
  fail "pretrain: no resume from an iteration before $iters"
fi
echo "training stopped and saved at iteration $resumed, requeued, resumed and finished"

# same_losses REFERENCE RUN: the same train and validation records (the last of each, a resumed
# run having logged some twice), with bit-identical losses.
same_losses() {
  python3 - "$1" "$2" "$iters" <<'PY'
import json, sys
def last_by_key(path):
    records = {}
    for j in map(json.loads, open(path)):
        records[(j["event"], j["iteration"])] = j
    return records
ref, run = last_by_key(sys.argv[1]), last_by_key(sys.argv[2])
assert sorted(ref) == sorted(run), (sorted(ref), sorted(run))
for k in ref:
    assert ref[k]["lm_loss"] == run[k]["lm_loss"], (k, ref[k]["lm_loss"], run[k]["lm_loss"])
print(f"{len(ref)} records equal; final lm loss {ref[('train', int(sys.argv[3]))]['lm_loss']}")
PY
}

# The same job uninterrupted gives the same losses, bit for bit.
read -r -a data <<< "$DATA_FLAGS"
read -r -a train <<< "$TRAIN_FLAGS"
pretrain_job() {  # pretrain_job NAME [sbatch flags...]: the pipeline's training job, in $run/NAME*
  local name=$1
  shift
  sbatch --parsable --cpus-per-task=1 --gpus-per-task=0 --ntasks-per-node=2 --output="$run/$name.out" "$@" \
    "$src/slurm/pretrain.sbatch" "$run/$name-ckpt" --data-path "$run/w/data/corpus_text_document" \
    --data-cache-path "$run/w/index-cache" "${data[@]}" "${tok[@]}" "${train[@]}" \
    --metrics-file "$run/$name.jsonl"
}
started=$SECONDS
id=$(pretrain_job reference)
# The same job on two nodes (partition two: the second slurmd of this host), one rank on each,
# queued behind the first: its ranks learn their nodes from Slurm (SLURM_NODEID) and MPI (PMI-2
# places them on two nodes), and meet across them.
if (( TEST_SLURM_TWO_NODES )); then
  two_nodes=$(pretrain_job two-nodes --partition=two --nodes=2 --ntasks-per-node=1)
fi
slurm_wait_gone 300 "$id" || fail "the uninterrupted training job did not finish"
[[ $(slurm_job_field "$id" JobState) == COMPLETED ]] || fail "uninterrupted job: $(slurm_job_field "$id" JobState)"
echo "uninterrupted training job: $((SECONDS - started)) s"
same_losses "$run/reference.jsonl" "$metrics" || fail "the resumed run differs from the uninterrupted one"
if (( TEST_SLURM_TWO_NODES )); then
  started=$SECONDS
  slurm_wait_gone 300 "$two_nodes" || fail "the two-node training job did not finish"
  [[ $(slurm_job_field "$two_nodes" JobState) == COMPLETED ]] ||
    fail "two-node job: $(slurm_job_field "$two_nodes" JobState)"
  [[ $(slurm_job_field "$two_nodes" NodeList) == 'node[1-2]' ]] ||
    fail "two-node job: ran on $(slurm_job_field "$two_nodes" NodeList)"
  grep -q '2 tasks on 2 node(s)' "$run/two-nodes.out" || fail "two-node job: not 2 tasks on 2 nodes"
  grep -q "> nodes: 2 (SLURM_NODEID and MPI's shared-memory split), node of each rank: 0 1$" "$run/two-nodes.out" ||
    fail "two-node job: the ranks did not find two nodes: $(grep 'nodes: ' "$run/two-nodes.out")"
  same_losses "$run/reference.jsonl" "$run/two-nodes.jsonl" || fail "the two-node run differs from the one-node run"
  echo "the same training job on two nodes, $(grep -o '> nodes: .*' "$run/two-nodes.out"), the same losses:" \
    "$((SECONDS - started)) s after the one-node job"
else
  echo "two-node job not run: this slurmd has no multiple-slurmd support (scontrol show config: MULTIPLE_SLURMD)"
fi

# Preemption unannounced: scontrol requeue from outside. Slurm sends the ranks SIGTERM, which
# saves as well; the job starts again and resumes.
started=$SECONDS
id=$(pretrain_job requeued)
wait_for_training "$run/requeued.jsonl" "$id"
scontrol requeue "$id"
release_requeued "$id"
slurm_wait_gone 300 "$id" || fail "the requeued training job did not finish"
[[ $(slurm_job_field "$id" JobState) == COMPLETED ]] || fail "requeued job: $(slurm_job_field "$id" JobState)"
grep -q 'exiting program after receiving SIGTERM\.' "$run/requeued.out" || fail "requeued job: no save on SIGTERM"
grep -q 'successfully loaded checkpoint from .* at iteration [1-9]' "$run/requeued.out" ||
  fail "requeued job: did not resume from its checkpoint"
same_losses "$run/reference.jsonl" "$run/requeued.jsonl" || fail "the requeued run differs from the uninterrupted one"
echo "training job requeued from outside (SIGTERM), resumed and finished: $((SECONDS - started)) s"

# A notice at the start. srun and mgt-train are each held back by a stand-in until the test
# lets them go: SIGUSR1 reaches the batch shell before srun has started; once srun has launched
# the ranks (still in their stand-ins, which would die of the signal) the template must still
# wait; once they run mgt-train, which holds it from its first instruction, it passes it on.
started=$SECONDS
mkdir -p "$run/held-path" "$run/held-bin"
printf '#!/bin/bash\nuntil [[ -e %q ]]; do sleep 0.1; done\nexec %q "$@"\n' "$run/go-srun" "$(command -v srun)" \
  > "$run/held-path/srun"
printf '#!/bin/bash\nuntil [[ -e %q ]]; do sleep 0.1; done\nexec %q "$@"\n' "$run/go-ranks" "$bin/mgt-train" \
  > "$run/held-bin/mgt-train"
chmod +x "$run/held-path/srun" "$run/held-bin/mgt-train"
id=$(PATH=$run/held-path:$PATH MGT_BIN=$run/held-bin pretrain_job early)
# wait_for_log PATTERN WHAT: until the job's log has a line matching PATTERN.
wait_for_log() {
  local deadline=$((SECONDS + 120))
  until grep -q "$1" "$run/early.out" 2>/dev/null; do
    (( SECONDS < deadline )) || fail "early notice: $2 within 120 s"
    [[ $(slurm_job_field "$id" JobState) =~ ^(PENDING|RUNNING|CONFIGURING)$ ]] ||
      fail "early notice: the job ended: $(slurm_job_field "$id" JobState)"
    sleep 0.1
  done
}
wait_for_log 'restart count 0,' "the batch shell did not start"
scancel --batch --signal=USR1 "$id"
wait_for_log 'received SIGUSR1; asking the ranks' "the batch shell did not take SIGUSR1"
touch "$run/go-srun"
# The step's two tasks run (in their stand-ins): Slurm lists them.
deadline=$((SECONDS + 120))
until [[ $(scontrol listpids "$id" 2>/dev/null | awk '$3 ~ /^[0-9]+$/ && $4 ~ /^[0-9]+$/' | wc -l) -ge 2 ]]; do
  (( SECONDS < deadline )) || fail "early notice: the ranks did not start within 120 s"
  sleep 0.1
done
sleep 1  # time enough for a template that does not wait to have passed it on
grep -q 'passing SIGUSR1 on' "$run/early.out" && fail "early notice: passed on before the ranks held it"
touch "$run/go-ranks"
wait_for_log 'passing SIGUSR1 on' "the template did not pass the signal on"
release_requeued "$id"
slurm_wait_gone 300 "$id" || fail "the training job noticed at its start did not finish"
[[ $(slurm_job_field "$id" JobState) == COMPLETED ]] || fail "early notice: $(slurm_job_field "$id" JobState)"
grep -q 'exiting program after receiving SIGUSR1\.' "$run/early.out" || fail "early notice: no stop on SIGUSR1"
grep -q "requeueing job $id" "$run/early.out" || fail "early notice: the job did not requeue itself"
grep -q 'successfully loaded checkpoint from .* at iteration [1-9]' "$run/early.out" ||
  fail "early notice: did not resume from its checkpoint"
same_losses "$run/reference.jsonl" "$run/early.jsonl" || fail "the run noticed at its start differs from the uninterrupted one"
echo "training job noticed at its start: saved, requeued, resumed and finished: $((SECONDS - started)) s"

# srun --mpi=pmix: where Slurm's PMIx plugin loads, the ranks cannot join MPICH's world and say so.
if srun --mpi=list 2>&1 | grep -q pmix && srun --mpi=pmix -n 1 true 2>/dev/null; then
  set +e
  srun --mpi=pmix -n 2 --cpus-per-task=1 "$bin/mgt-train" --mock-data --num-layers 1 --hidden-size 32 \
    --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 \
    --global-batch-size 2 --lr 1e-3 --train-iters 1 --eval-iters 0 --device cpu \
    --tokenizer-type NullTokenizer --vocab-size 64 > "$run/pmix.out" 2>&1
  pmix_status=$?
  set -e
  grep -q 'started through PMIx (SLURM_MPI_TYPE=pmix' "$run/pmix.out" ||
    { cat "$run/pmix.out" >&2; fail "srun --mpi=pmix: no PMIx message"; }
  (( pmix_status != 0 )) || fail "srun --mpi=pmix: a world of singletons trained"
  echo "srun --mpi=pmix refused with a message"
else
  echo "srun --mpi=pmix not checked: Slurm's PMIx plugin does not load here (no libpmix)"
fi
echo "slurm cluster: all checks passed"
