#!/usr/bin/env bash
# The training templates and the pipeline driver without a cluster, with stand-ins for sbatch,
# srun and scontrol (tests/e2e/slurm_cluster.sh runs them on a real one): pipeline.sh --dry-run
# prints the six sbatch commands and submits nothing; pipeline.sh chains six jobs with afterok
# and prints their ids; pretrain.sbatch passes SIGUSR1 reaching the batch shell on to the ranks,
# which save and exit 0, then requeues its job; a second start resumes from the checkpoint; a
# SIGUSR1 that comes while the task is still being launched waits until the rank holds it;
# convert.sbatch writes a Hugging Face directory; every template refuses a short argument list.
# Usage: bash tests/e2e/slurm_templates.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

mkdir -p "$work/fake"
cat > "$work/fake/srun" <<'SH'
#!/usr/bin/env bash
# Becomes the step's one task, whose process id scancel below signals.
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
echo $$ > "$FAKE_SLURM/step.pid"
# A launch that takes its time: the task starts once FAKE_SRUN_GO exists.
if [[ -n ${FAKE_SRUN_GO:-} ]]; then until [[ -e $FAKE_SRUN_GO ]]; do sleep 0.05; done; fi
exec "$@"
SH
cat > "$work/fake/scancel" <<'SH'
#!/usr/bin/env bash
echo "$*" >> "$FAKE_SLURM/scancel"
for arg; do
  case $arg in --signal=*) kill -s "${arg#--signal=}" "$(cat "$FAKE_SLURM/step.pid")" ;; esac
done
SH
cat > "$work/fake/sbatch" <<'SH'
#!/usr/bin/env bash
# Records its arguments, one submission a line, and answers with the next job id.
echo "$*" >> "$FAKE_SLURM/submitted"
id=$(( $(wc -l < "$FAKE_SLURM/submitted") + 100 ))
echo "$id;cluster"
SH
cat > "$work/fake/scontrol" <<'SH'
#!/usr/bin/env bash
# listpids: the step's one task, once it runs (as Slurm lists the tasks of a job's steps).
if [[ $1 == listpids ]]; then
  echo "PID      JOBID    STEPID   LOCALID GLOBALID"
  [[ -s $FAKE_SLURM/step.pid ]] && echo "$(cat "$FAKE_SLURM/step.pid") $2 0 0 0"
  exit 0
fi
echo "$*" >> "$FAKE_SLURM/scontrol"
SH
chmod +x "$work/fake/"*
export PATH="$work/fake:$PATH" MGT_BIN="$bin" FAKE_SLURM="$work"
unset "${!SLURM_@}"

printf '%s\n' "$work/a.jsonl" "$work/b.jsonl" > "$work/shards.txt"
expect_status 0 "$src/slurm/pipeline.sh" --dry-run "$work/shards.txt" "$work/run" --seed 7
[[ ! -e $work/submitted && ! -e $work/run ]] || fail "--dry-run submitted or wrote something"
[[ $(grep -c '^[a-z]*=$(sbatch --parsable ' "$work/out.txt") == 6 ]] || fail "--dry-run: $(cat "$work/out.txt")"
grep -q -- '^tokenize=$(sbatch .*--array=0-1 .*tokenize-shards.sbatch' "$work/out.txt" ||
  fail "--dry-run: no tokenize array over 2 shards"
grep -q -- '^convert=$(sbatch .*--dependency=afterok:$pretrain .*convert.sbatch' "$work/out.txt" ||
  fail "--dry-run: convert does not wait for pretrain"
# What it prints is the submission itself: run as a script, it submits the same six jobs.
bash "$work/out.txt" > "$work/dry-run-jobs.txt"
[[ $(cat "$work/dry-run-jobs.txt") == "tokenize=101 merge=102 index=103 pretrain=104 convert=105 eval=106" ]] ||
  fail "the --dry-run script printed: $(cat "$work/dry-run-jobs.txt")"
mv "$work/submitted" "$work/submitted-by-dry-run"
rm -rf "$work/run"

expect_status 0 "$src/slurm/pipeline.sh" "$work/shards.txt" "$work/run" --seed 7
[[ $(cat "$work/out.txt") == "tokenize=101 merge=102 index=103 pretrain=104 convert=105 eval=106" ]] ||
  fail "pipeline.sh printed: $(cat "$work/out.txt")"
python3 - "$work/submitted" "$work/run" <<'PY' || fail "pipeline.sh: the submissions"
import sys
lines = open(sys.argv[1]).read().splitlines()
run = sys.argv[2]
assert len(lines) == 6, lines
names = ["tokenize-shards", "merge", "index", "pretrain", "convert", "eval"]
for i, (line, name) in enumerate(zip(lines, names)):
    assert f"/slurm/{name}.sbatch" in line, (name, line)
    assert ("--dependency=afterok:%d " % (100 + i) in line) == (i > 0), line
pretrain = lines[3]
for flag in ["--ntasks-per-node=2", "--gpus-per-task=1", f"{run}/ckpt", f"--data-path {run}/data/corpus_text_document",
             f"--data-cache-path {run}/index-cache", "--train-iters 200", "--seed 7"]:
    assert flag in pretrain, (flag, pretrain)
assert f"--data-cache-path {run}/index-cache" in lines[2] and "--train-iters 200" in lines[2], lines[2]
PY
cmp "$work/submitted" "$work/submitted-by-dry-run" || fail "the --dry-run script submits other jobs"
expect_status 2 "$src/slurm/pipeline.sh" "$work/shards.txt"
grep -q "usage:" "$work/err.txt" || fail "pipeline.sh without WORK_DIR"
# A flag mgt-train refuses stops the pipeline before anything is submitted or printed, dry run or
# not: a typo, or a layout the job's ranks cannot hold.
rm -f "$work/submitted"
for bad in "--no-such-flag" "--tensor-model-parallel-size 3"; do
  for dry in --dry-run ""; do
    expect_status 2 "$src/slurm/pipeline.sh" $dry "$work/shards.txt" "$work/run-bad" $bad
    grep -q "^pipeline.sh: the pretrain job's flags are refused: mgt-train: " "$work/err.txt" ||
      fail "pipeline.sh $dry with $bad: $(cat "$work/err.txt")"
    [[ ! -s $work/out.txt && ! -e $work/submitted && ! -e $work/run-bad ]] || fail "pipeline.sh $dry $bad submitted or wrote something"
  done
done

# pretrain.sbatch: SIGUSR1 to the batch shell (sbatch --signal=B:USR1@...) stops the run after
# an iteration with a checkpoint, exit status 0, and a requeue; the next start resumes.
train=(--mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3
       --train-iters 100000 --log-interval 1 --eval-iters 0 --save-interval 100000 --device cpu
       --tokenizer-type NullTokenizer --vocab-size 64 --metrics-file "$work/metrics.jsonl")
SLURM_JOB_ID=42 bash "$src/slurm/pretrain.sbatch" "$work/ckpt" "${train[@]}" > "$work/pretrain.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  grep -q '"event": "train"' "$work/metrics.jsonl" 2>/dev/null && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
kill -USR1 "$job"
set +e
wait "$job"
status=$?
set -e
[[ $status == 0 ]] || { cat "$work/pretrain.log" >&2; fail "pretrain.sbatch exited $status after SIGUSR1"; }
grep -q 'exiting program after receiving SIGUSR1\.' "$work/pretrain.log" || fail "the ranks did not stop on SIGUSR1"
[[ $(cat "$work/scontrol") == "requeue 42" ]] || fail "no requeue: $(cat "$work/scontrol" 2>/dev/null)"
saved=$(cat "$work/ckpt/latest_checkpointed_iteration.txt")
(( saved >= 1 && saved < 100000 )) || fail "checkpoint at iteration $saved"
# The requeued start: --load finds the checkpoint (stopped at once by --exit-interval).
SLURM_JOB_ID=42 SLURM_RESTART_COUNT=1 expect_status 0 bash "$src/slurm/pretrain.sbatch" "$work/ckpt" \
  "${train[@]}" --exit-interval $((saved + 1))
grep -q 'restart count 1,' "$work/out.txt" || fail "restart count not logged"
grep -q "successfully loaded checkpoint from $work/ckpt .* at iteration $saved\$" "$work/out.txt" ||
  fail "the second start did not resume from iteration $saved"
[[ $(wc -l < "$work/scontrol") == 1 ]] || fail "a run that was not signalled requeued its job"

# A notice while the step's task is still being launched (it would die of it): the template waits
# until the rank holds the signal (mgt-train does from its first instruction), then passes it on.
rm -f "$work/step.pid" "$work/scontrol"
FAKE_SRUN_GO=$work/go SLURM_JOB_ID=44 bash "$src/slurm/pretrain.sbatch" "$work/ckpt3" "${train[@]}" \
  > "$work/pretrain3.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  [[ -s $work/step.pid ]] && break
  sleep 0.05
done
kill -USR1 "$job"
for _ in $(seq 1 600); do
  grep -q 'received SIGUSR1; asking the ranks' "$work/pretrain3.log" && break
  sleep 0.05
done
sleep 1  # time enough for a template that does not wait to have passed it on
grep -q 'passing SIGUSR1 on' "$work/pretrain3.log" && fail "SIGUSR1 passed on to a task still being launched"
touch "$work/go"
set +e
wait "$job"
status=$?
set -e
[[ $status == 0 ]] || { cat "$work/pretrain3.log" >&2; fail "pretrain.sbatch noticed at the start exited $status"; }
grep -q 'the ranks have started; passing SIGUSR1 on' "$work/pretrain3.log" || fail "not passed on once started"
grep -q 'exiting program after receiving SIGUSR1\.' "$work/pretrain3.log" || fail "the rank noticed at its start did not stop on SIGUSR1"
[[ $(cat "$work/scontrol") == "requeue 44" ]] || fail "noticed at the start: no requeue: $(cat "$work/scontrol" 2>/dev/null)"

# Megatron's own --exit-signal-handler (SIGTERM) given by the caller replaces the template's
# (USR1 from Slurm is then passed on as SIGTERM).
SLURM_JOB_ID=43 bash "$src/slurm/pretrain.sbatch" "$work/ckpt2" "${train[@]}" --exit-signal-handler \
  > "$work/pretrain2.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  grep -q 'iteration  *1/' "$work/pretrain2.log" 2>/dev/null && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
kill -USR1 "$job"
wait "$job" || { cat "$work/pretrain2.log" >&2; fail "pretrain.sbatch with --exit-signal-handler"; }
grep -q 'asking the ranks to save and stop (SIGTERM)' "$work/pretrain2.log" || fail "USR1 not passed on as SIGTERM"
# srun would take SIGTERM as its own: the ranks get it through Slurm.
[[ $(cat "$work/scancel") == "--signal=TERM 43" ]] || fail "SIGTERM not sent with scancel"
grep -q 'exiting program after receiving SIGTERM\.' "$work/pretrain2.log" || fail "the ranks did not stop on SIGTERM"

# convert.sbatch: the latest checkpoint to a Hugging Face directory.
expect_status 0 bash "$src/slurm/convert.sbatch" "$work/ckpt" "$work/hf"
[[ -s $work/hf/config.json && -s $work/hf/model.safetensors ]] || fail "convert.sbatch wrote no HF directory"

for template in pretrain convert; do
  expect_status 2 bash "$src/slurm/$template.sbatch"
  grep -q "usage:" "$work/err.txt" || fail "$template.sbatch without arguments"
done
echo "slurm templates: ok"
