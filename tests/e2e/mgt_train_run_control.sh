#!/usr/bin/env bash
# End-to-end checks, across ranks, of Megatron's flags that choose which steps run and which
# checkpoint is read: --iterations-to-skip at DP=2 x PP=2 logs the one-rank run's records (the
# same iterations skipped, the same losses and consumed samples); --ckpt-step resumes the one-rank
# run's iteration 10 at DP=2 x PP=2 and continues its curve; --skip-train at PP=2 evaluates a
# checkpoint as one rank does; --log-progress on four ranks writes each line once, naming four GPUs;
# --check-weight-hash-across-dp-replicas-interval finds the data-parallel replicas equal, and
# --check-for-spiky-loss, on the pipeline's last stage, changes nothing where no loss spikes, with
# the interleaved schedule too.
# Usage: bash tests/e2e/mgt_train_run_control.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# 22 iterations, of which those logged as 4 and 12 are skipped: 20 logged, as compare_curves wants.
SKIP=("${GPT2[@]}" --train-iters 22 --iterations-to-skip 3 11)
expect_status 0 "$BIN/mgt-train" "${SKIP[@]}" --metrics-file "$WORK/one.jsonl" --save "$WORK/one" --save-interval 10
grep -q "iteration 4 skipped (--iterations-to-skip): its 8 samples read and dropped" "$WORK/err.txt" ||
  fail "the skipped iteration was not named: $(cat "$WORK/err.txt")"
python3 - "$WORK/one.jsonl" <<'PY' || fail "the one-rank run's records of the skipped iterations"
import json, sys
train = {r["iteration"]: r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "train"}
assert 4 not in train and 12 not in train and len(train) == 20, sorted(train)
assert train[3]["skipped_samples"] == 0 and train[5]["skipped_samples"] == 8, (train[3], train[5])
assert train[22]["skipped_samples"] == 16 and train[22]["consumed_samples"] == 176, train[22]
PY

expect_status 0 ranks 4 "$BIN/mgt-train" "${SKIP[@]}" --pipeline-model-parallel-size 2 --use-distributed-optimizer \
  --metrics-file "$WORK/dp2pp2.jsonl" --save "$WORK/four" --save-interval 10 --log-progress \
  --check-weight-hash-across-dp-replicas-interval 10 --check-for-spiky-loss
compare_curves "$WORK/one.jsonl" "$WORK/dp2pp2.jsonl" same
# The replicas' weights compared before training and after iterations 10 and 20, as Megatron does.
[[ "$(grep '^>>> Weight hashes' "$WORK/out.txt")" == $'>>> Weight hashes match after 0 iterations...\n>>> Weight hashes match after 10 iterations...\n>>> Weight hashes match after 20 iterations...' ]] ||
  fail "weight hash lines: $(grep '^>>> Weight' "$WORK/out.txt")"
python3 - "$WORK/four/progress.txt" <<'PY' || fail "progress.txt of four ranks: $(cat "$WORK/four/progress.txt")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
events = [re.sub(r"^\S+ \S+\tJob ID: [^\t]*\t", "", line).split("\tJob throughput")[0] for line in lines]
assert events == ["# GPUs: 4\tStarting job", "# GPUs: 4\tSaved checkpoint\tIteration: 10",
                  "# GPUs: 4\tSaved checkpoint\tIteration: 20", "# GPUs: 4\tSaved checkpoint\tIteration: 22"], events
PY

# Both checks under the interleaved schedule (two virtual stages per rank), the distributed
# optimizer gathering the weights behind the forward: the replicas equal, the curve the one-rank run's.
CHUNKED=("${GPT2[@]}" --num-layers 4 --micro-batch-size 1)
expect_status 0 "$BIN/mgt-train" "${CHUNKED[@]}" --metrics-file "$WORK/chunked-one.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${CHUNKED[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
  --check-weight-hash-across-dp-replicas-interval 8 --check-for-spiky-loss --metrics-file "$WORK/chunked.jsonl"
[[ $(grep -c '^>>> Weight hashes match after \(0\|8\|16\) iterations\.\.\.$' "$WORK/out.txt") == 3 ]] ||
  fail "weight hash lines, interleaved: $(grep '^>>> Weight' "$WORK/out.txt")"
compare_curves "$WORK/chunked-one.jsonl" "$WORK/chunked.jsonl" same

# The one-rank run's iteration 10, resumed at DP=2 x PP=2 (resharded on load) with its tracker at 22.
expect_status 0 ranks 4 "$BIN/mgt-train" "${SKIP[@]}" --pipeline-model-parallel-size 2 --use-distributed-optimizer \
  --load "$WORK/one" --ckpt-step 10 --metrics-file "$WORK/from10.jsonl"
compare_curves "$WORK/one.jsonl" "$WORK/from10.jsonl" continues

# --skip-train: the checkpoint of iteration 22 evaluated from the first validation sample, at PP=2
# as on one rank.
expect_status 0 "$BIN/mgt-train" "${SKIP[@]}" --load "$WORK/one" --skip-train --metrics-file "$WORK/eval-one.jsonl"
grep -q "^skipping training (--skip-train is on) ...$" "$WORK/out.txt" || fail "no --skip-train line"
expect_status 0 ranks 2 "$BIN/mgt-train" "${SKIP[@]}" --pipeline-model-parallel-size 2 --load "$WORK/one" \
  --skip-train --metrics-file "$WORK/eval-pp2.jsonl"
python3 - "$WORK/eval-one.jsonl" "$WORK/eval-pp2.jsonl" <<'PY' || fail "--skip-train at PP=2 against one rank"
import json, sys
one, pp2 = ([json.loads(line) for line in open(path)] for path in sys.argv[1:])
assert [r["event"] for r in one] == ["validation", "test"] and all(r["iteration"] == 22 for r in one), one
assert [r["event"] for r in pp2] == ["validation", "test"], pp2
for a, b in zip(one, pp2):
    assert abs(a["lm_loss"] - b["lm_loss"]) <= 1e-5 * abs(a["lm_loss"]), (a, b)
PY
echo "run control: skipped iterations, --ckpt-step, --skip-train and the progress log agree across layouts"
