#!/usr/bin/env python3
"""Draw a training run's loss curves as an SVG image: train and validation lm loss against
iteration, read from the metrics file mgt-train writes (--metrics-file, one JSON object a line).

Standard library only, so that the main job draws its picture on any machine with python3.
Usage: tools/plot_loss_curves.py METRICS.jsonl OUT.svg
"""
import json
import math
import os
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50  # margins around the plot area, in pixels
TRAIN_COLOUR, VALID_COLOUR = "#1f77b4", "#d62728"


def read_losses(path):
    """(iteration, lm loss) pairs of the train rows and of the validation rows, in file order."""
    train, valid = [], []
    with open(path) as lines:
        for line in lines:
            if not line.strip():
                continue
            row = json.loads(line)
            loss = row.get("lm_loss")
            if loss is None or not math.isfinite(loss):
                continue  # a row without a drawable loss (skipped or overflowed iterations)
            if row.get("event") == "train":
                train.append((row["iteration"], loss))
            elif row.get("event") == "validation":
                valid.append((row["iteration"], loss))
    return train, valid


def nice_ticks(low, high, count=5):
    """Round tick values from at most `low` to at least `high`: steps of 1, 2 or 5 times a power of ten."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    # The last tick is at or above `high`, so that no point falls outside the axes.
    ticks = [round(math.floor(low / step) * step, 10)]
    while ticks[-1] < high - step * 1e-9:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def label(value):
    return f"{value:g}"


def render(train, valid):
    points = train + valid
    if not points:
        raise SystemExit("no lm loss in the metrics file: nothing to draw")
    x_ticks = nice_ticks(0, max(i for i, _ in points))
    y_ticks = nice_ticks(min(l for _, l in points), max(l for _, l in points))
    x_low, x_high, y_low, y_high = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(iteration):
        return LEFT + (iteration - x_low) / (x_high - x_low) * plot_w

    def y(loss):
        return TOP + (y_high - loss) / (y_high - y_low) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="15">lm loss against iteration</text>']
    for t in x_ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{TOP}" x2="{x(t):.1f}" y2="{TOP + plot_h}" stroke="#ddd"/>')
        out.append(f'<text x="{x(t):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{label(t)}</text>')
    for t in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{y(t):.1f}" x2="{LEFT + plot_w}" y2="{y(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(t) + 4:.1f}" text-anchor="end">{label(t)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">iteration</text>')
    out.append(f'<text transform="translate(18 {TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">lm loss</text>')
    if train:
        path = " ".join(f"{x(i):.1f},{y(l):.1f}" for i, l in train)
        out.append(f'<polyline class="train" points="{path}" fill="none" stroke="{TRAIN_COLOUR}" stroke-width="2"/>')
    if valid:
        path = " ".join(f"{x(i):.1f},{y(l):.1f}" for i, l in valid)
        out.append(f'<polyline class="validation" points="{path}" fill="none" stroke="{VALID_COLOUR}" '
                   f'stroke-width="1.5" stroke-dasharray="5 3"/>')
        for i, l in valid:
            out.append(f'<circle class="validation" cx="{x(i):.1f}" cy="{y(l):.1f}" r="4" fill="{VALID_COLOUR}">'
                       f'<title>{escape(f"validation, iteration {i}: {l:.3f}")}</title></circle>')
    legend_x = LEFT + plot_w - 170
    for row, (name, colour, count) in enumerate((("train lm loss", TRAIN_COLOUR, len(train)),
                                                 ("validation lm loss", VALID_COLOUR, len(valid)))):
        if not count:
            continue
        ly = TOP + 18 + row * 18
        out.append(f'<line x1="{legend_x}" y1="{ly - 4}" x2="{legend_x + 24}" y2="{ly - 4}" stroke="{colour}" '
                   f'stroke-width="2"/>')
        out.append(f'<text x="{legend_x + 30}" y="{ly}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        raise SystemExit(f"usage: {argv[0]} METRICS.jsonl OUT.svg")
    train, valid = read_losses(argv[1])
    image = render(train, valid)
    # Written whole, then renamed: a reader never sees half an image.
    partial = argv[2] + ".partial"
    with open(partial, "w") as out:
        out.write(image)
    os.replace(partial, argv[2])


if __name__ == "__main__":
    main(sys.argv)
