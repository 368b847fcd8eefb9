#!/usr/bin/env bash
# End-to-end check of tools/plot_loss_curves.py, which draws the main job's loss curves: train a
# tiny GPT with periodic validation, draw its metrics file, and read the image back as XML with
# one point per train row and per validation row.
# Usage: bash tests/e2e/loss_curves_svg.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

expect_status 0 "$bin/mgt-train" --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 \
  --max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --mock-data \
  --tokenizer-type NullTokenizer --vocab-size 100 --device cpu --train-iters 6 --log-interval 2 \
  --eval-interval 3 --eval-iters 1 --metrics-file "$work/metrics.jsonl"
expect_status 0 python3 "$src/tools/plot_loss_curves.py" "$work/metrics.jsonl" "$work/loss.svg"
[[ ! -e "$work/loss.svg.partial" ]] || fail "the partial image was left behind"
python3 - "$work/metrics.jsonl" "$work/loss.svg" <<'PY' || fail "the image does not match the metrics"
import json, sys
import xml.etree.ElementTree as ET
rows = [json.loads(line) for line in open(sys.argv[1])]
ns = {"svg": "http://www.w3.org/2000/svg"}
svg = ET.parse(sys.argv[2]).getroot()
assert svg.tag == "{http://www.w3.org/2000/svg}svg", svg.tag
lines = {p.get("class"): p.get("points").split() for p in svg.findall("svg:polyline", ns)}
train = [r for r in rows if r["event"] == "train"]
valid = [r for r in rows if r["event"] == "validation"]
assert len(train) == 3 and len(valid) == 3, rows  # validation at 3 and 6, and on the final model
assert len(lines["train"]) == len(train), lines
assert len(lines["validation"]) == len(valid), lines
assert len(svg.findall("svg:circle", ns)) == len(valid)
# Later iterations sit further right.
xs = [float(p.split(",")[0]) for p in lines["train"]]
assert xs == sorted(xs) and xs[0] < xs[-1], xs
# Every point lies inside the frame, the first train loss (the highest) included.
frame = next(r for r in svg.findall("svg:rect", ns) if r.get("fill") == "none")
left, top = float(frame.get("x")), float(frame.get("y"))
right, bottom = left + float(frame.get("width")), top + float(frame.get("height"))
for points in lines.values():
    for p in points:
        x, y = map(float, p.split(","))
        assert left <= x <= right and top <= y <= bottom, (p, left, top, right, bottom)
texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
assert "train lm loss" in texts and "validation lm loss" in texts and "iteration" in texts, texts
PY

# A highest loss between two ticks still lies inside the frame: the axis reaches past it.
printf '%s\n' '{"event": "train", "iteration": 10, "lm_loss": 10.44}' '{"event": "train", "iteration": 60, "lm_loss": 6.99}' \
  '{"event": "validation", "iteration": 60, "lm_loss": 7.3}' >"$work/between.jsonl"
expect_status 0 python3 "$src/tools/plot_loss_curves.py" "$work/between.jsonl" "$work/between.svg"
python3 - "$work/between.svg" <<'PY' || fail "a point lies outside the frame"
import sys
import xml.etree.ElementTree as ET
ns = {"svg": "http://www.w3.org/2000/svg"}
svg = ET.parse(sys.argv[1]).getroot()
frame = next(r for r in svg.findall("svg:rect", ns) if r.get("fill") == "none")
top, bottom = float(frame.get("y")), float(frame.get("y")) + float(frame.get("height"))
for line in svg.findall("svg:polyline", ns):
    for p in line.get("points").split():
        assert top <= float(p.split(",")[1]) <= bottom, (p, top, bottom)
PY

# A metrics file with no loss is an error, not an empty picture.
: >"$work/empty.jsonl"
expect_status 1 python3 "$src/tools/plot_loss_curves.py" "$work/empty.jsonl" "$work/empty.svg"
grep -q "nothing to draw" "$work/err.txt" || fail "empty metrics: $(cat "$work/err.txt")"
echo "loss curves drawn"
