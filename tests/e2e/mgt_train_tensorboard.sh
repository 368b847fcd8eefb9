#!/usr/bin/env bash
# End-to-end checks of mgt-train's --tensorboard-dir and of how it takes a Megatron launch
# script's flags: train a tiny GPT on mock data writing TensorBoard events, read them back (with
# the tensorboard package's reader when it is installed, else with tests/e2e/lib's own decoder,
# which checks every record's CRCs), compare them with the metrics file, check the TensorBoard
# switches, a run killed mid-way, the start-up line naming ignored flags, and every bad flag
# reported at once.
# Usage: bash tests/e2e/mgt_train_tensorboard.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
events="$src/tests/e2e/lib/tensorboard_events.py"

model=(--num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16
       --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --mock-data --tokenizer-type NullTokenizer
       --vocab-size 100 --device cpu)

expect_status 0 "$bin/mgt-train" --version
grep -Eq '^mgt-train \(mgt\) [0-9]+\.[0-9]+\.[0-9]+, ' "$work/out.txt" || fail "--version"

# --help and the man page agree: every flag --help lists (the ignored ones included) is documented.
expect_status 0 "$bin/mgt-train" --help
for flag in $(grep -oE -- '--[a-z][a-z0-9_-]*' "$work/out.txt" | sort -u); do
  grep -qF -- "\\-\\-${flag#--}" "$src/man/man1/mgt-train.1" || fail "$flag is in --help but not in mgt-train.1"
done

# Every refused or unknown flag at once, one line each, exit 2.
expect_status 2 "$bin/mgt-train" "${model[@]}" --train-iters 2 --batch-size 4 --no-such-flag 1 \
  --checkpoint-activations --ckpt-format zarr
[[ $(wc -l <"$work/err.txt") == 4 ]] || { cat "$work/err.txt" >&2; fail "expected four error lines"; }
grep -q '^mgt-train: --batch-size is not supported by mgt-train: Megatron replaced it with --micro-batch-size$' \
  "$work/err.txt" || fail "--batch-size not refused with its successor"
grep -q '^mgt-train: unknown flag --no-such-flag (see --help)$' "$work/err.txt" || fail "unknown flag not named"
grep -q '^mgt-train: --checkpoint-activations is not supported by mgt-train: Megatron replaced it with --recompute-activations' \
  "$work/err.txt" || fail "--checkpoint-activations not refused with its successor"
grep -q '^mgt-train: --ckpt-format zarr is not supported by mgt-train: ' "$work/err.txt" || fail "--ckpt-format zarr"
# Weights & Biases: as in Megatron, a project needs an experiment name.
expect_status 2 "$bin/mgt-train" "${model[@]}" --train-iters 2 --wandb-project p
grep -q '^mgt-train: --wandb-project needs --wandb-exp-name (Megatron: Please specify the wandb experiment name!)$' \
  "$work/err.txt" || fail "--wandb-project without --wandb-exp-name"

# Every scalar Megatron writes, with the switches that add some; flags of Megatron's Python
# runtime are accepted and named once.
expect_status 0 "$bin/mgt-train" "${model[@]}" --train-iters 6 --log-interval 1 --eval-interval 3 --eval-iters 1 \
  --tensorboard-dir "$work/tb" --log-validation-ppl-to-tensorboard --log-timers-to-tensorboard --log-throughput \
  --log-world-size-to-tensorboard --metrics-file "$work/metrics.jsonl" --num-workers 2 --use-flash-attn \
  --distributed-backend nccl --ckpt-format torch_dist --wandb-project gpt --wandb-exp-name run-1
[[ $(grep -c 'ignored flags' "$work/err.txt") == 1 ]] || fail "expected one line naming the ignored flags"
grep -q '^mgt-train: ignored flags (they change nothing here): --num-workers 2 (.*); --use-flash-attn (.*); --ckpt-format torch_dist (.*); --wandb-project gpt, --wandb-exp-name run-1 (.*`wandb sync --sync-tensorboard -p PROJECT DIR`.*)$' \
  "$work/err.txt" || fail "ignored flags line: $(grep 'ignored flags' "$work/err.txt")"
grep -q '^> setting tensorboard \.\.\.$' "$work/out.txt" || fail "no '> setting tensorboard ...' line"

read_events() {  # read_events DIR OUT.json: with the tensorboard package when it is installed
  python3 "$events" "$1" >"$2" || fail "cannot read the events in $1"
  # A finished run's files end in whole records.
  python3 "$events" --reader own "$1" | python3 -c 'import json, sys; sys.exit(bool(json.load(sys.stdin)["truncated"]))' ||
    fail "a finished run's events end in a record cut short ($1)"
  if [[ $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["reader"])' "$2") == tensorboard ]]; then
    echo "events read with the tensorboard package's reader"
    # The package and the decoder here must agree.
    python3 "$events" --reader own "$1" >"$2.own" || fail "own decoder failed on $1"
    python3 - "$2" "$2.own" <<'PY' || fail "the tensorboard package and the own decoder disagree"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
key = lambda d: [(s["tag"], s["step"], s["value"]) for s in d["scalars"]]
assert key(a) == key(b) and a["file_versions"] == b["file_versions"], (a, b)
PY
  else
    echo "events read with the decoder of tests/e2e/lib (no tensorboard package)"
  fi
}

read_events "$work/tb" "$work/events.json"
python3 - "$work/events.json" "$work/metrics.jsonl" <<'PY' || fail "TensorBoard scalars"
import json, math, re, struct, sys
events = json.load(open(sys.argv[1]))
metrics = [json.loads(line) for line in open(sys.argv[2])]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
close = lambda a, b: math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)

assert len(events["files"]) == 1, events["files"]
assert re.fullmatch(r"events\.out\.tfevents\.\d{10}\..+\.\d+\.0", events["files"][0]), events["files"]
assert events["file_versions"] == ["brain.Event:2"], events["file_versions"]
series = {}
for s in events["scalars"]:
    series.setdefault(s["tag"], []).append((s["step"], s["value"]))
expected_tags = {"learning-rate", "batch-size", "lm loss", "loss-scale", "world-size", "grad-norm",
                 "lm loss validation", "lm loss validation ppl"}
expected_tags |= {t + " vs samples" for t in expected_tags} | {"iteration-time", "throughput"}
assert set(series) == expected_tags, sorted(set(series) ^ expected_tags)

train = [m for m in metrics if m["event"] == "train"]
assert [m["iteration"] for m in train] == [1, 2, 3, 4, 5, 6]
for tag, key in (("lm loss", "lm_loss"), ("learning-rate", "learning_rate"), ("grad-norm", "grad_norm"),
                 ("batch-size", "global_batch_size"), ("loss-scale", "loss_scale")):
    assert [step for step, _ in series[tag]] == [1, 2, 3, 4, 5, 6], (tag, series[tag])
    assert [step for step, _ in series[tag + " vs samples"]] == [4, 8, 12, 16, 20, 24], tag
    for (step, value), (_, twin), m in zip(series[tag], series[tag + " vs samples"], train):
        assert value == twin and close(value, f32(m[key])), (tag, step, value, m[key])
assert all(v == 1.0 for _, v in series["world-size"])
assert [s for s, _ in series["iteration-time"]] == [1, 2, 3, 4, 5, 6]
assert all(v > 0 for _, v in series["iteration-time"] + series["throughput"])
for (_, seconds), m in zip(series["iteration-time"], train):
    assert close(seconds, f32(m["elapsed_ms_per_iteration"] / 1000)) or abs(seconds * 1000 - m["elapsed_ms_per_iteration"]) < 0.1

# Validation at 3 and 6, the final validation and the test set (Megatron writes both under the
# validation names), each with its perplexity.
evaluations = [m for m in metrics if m["event"] in ("validation", "test")]
assert [(m["event"], m["iteration"]) for m in evaluations] == [("validation", 3), ("validation", 6), ("validation", 6), ("test", 6)], evaluations
assert [s for s, _ in series["lm loss validation"]] == [3, 6, 6, 6]
assert [s for s, _ in series["lm loss validation vs samples"]] == [12, 24, 24, 24]
for (_, value), (_, ppl), m in zip(series["lm loss validation"], series["lm loss validation ppl"], evaluations):
    assert close(value, f32(m["lm_loss"])), (value, m)
    assert math.isclose(ppl, math.exp(min(20, m["lm_loss"])), rel_tol=1e-5), (ppl, m)
wall = [s["wall_time"] for s in events["scalars"]]
assert wall == sorted(wall) and wall[0] > 1.6e9, "wall times"
PY

# The switches: every second iteration, no loss scale, no timers, no perplexity; the directory
# is made with its parents.
expect_status 0 "$bin/mgt-train" "${model[@]}" --train-iters 4 --log-interval 4 --eval-iters 0 \
  --tensorboard-dir "$work/runs/b" --tensorboard-log-interval 2 --no-log-loss-scale-to-tensorboard \
  --no-log-learning-rate-to-tensorboard --tensorboard-queue-size 1
read_events "$work/runs/b" "$work/b.json"
python3 - "$work/b.json" <<'PY' || fail "TensorBoard switches"
import json, sys
series = {}
for s in json.load(open(sys.argv[1]))["scalars"]:
    series.setdefault(s["tag"], []).append(s["step"])
assert set(series) == {"batch-size", "batch-size vs samples", "lm loss", "lm loss vs samples", "grad-norm",
                       "grad-norm vs samples"}, sorted(series)
assert series["lm loss"] == [2, 4] and series["lm loss vs samples"] == [8, 16], series
PY

# A run killed mid-way leaves its written batches whole, but for one its write was cut short in:
# the file reads to its last whole record, as TensorBoard's loader reads it.
"$bin/mgt-train" "${model[@]}" --train-iters 1000000 --log-interval 1 --eval-iters 0 \
  --tensorboard-dir "$work/killed" >/dev/null 2>&1 &
pid=$!
trap 'kill -KILL $pid 2>/dev/null; rm -rf "$work"' EXIT
size=0
for _ in $(seq 600); do
  size=$( (cat "$work"/killed/events.out.tfevents.* 2>/dev/null || true) | wc -c)
  ((size > 4000)) && break
  sleep 0.1
done
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
trap 'rm -rf "$work"' EXIT
((size > 4000)) || fail "the killed run wrote no events"
python3 "$events" --reader own "$work/killed" >"$work/killed.json" || fail "the killed run's events do not read back"
python3 - "$work/killed.json" <<'PY' || fail "the killed run's events"
import json, sys
d = json.load(open(sys.argv[1]))
steps = [s["step"] for s in d["scalars"] if s["tag"] == "lm loss"]
assert len(d["truncated"]) <= 1, d["truncated"]
assert d["file_versions"] == ["brain.Event:2"] and len(steps) >= 5 and steps == list(range(1, len(steps) + 1)), steps
PY

# An events directory that cannot be made is a runtime error naming the flag.
touch "$work/file"
expect_status 1 "$bin/mgt-train" "${model[@]}" --train-iters 1 --tensorboard-dir "$work/file/tb"
grep -q "^mgt-train: .*--tensorboard-dir: cannot create '$work/file/tb'" "$work/err.txt" ||
  fail "unusable --tensorboard-dir: $(cat "$work/err.txt")"
echo "mgt_train_tensorboard: all checks passed"
