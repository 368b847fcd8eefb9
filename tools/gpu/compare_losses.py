#!/usr/bin/env python3
"""The largest relative lm-loss difference of a run against a reference, iteration by iteration.

Reads the train records of two mgt-train --metrics-file outputs and prints one line:
"N iterations, max rel lm-loss diff X (at iteration I)", or "FAIL (...)" when the run logged
other iterations than the reference (or none). Exit status 0 either way: the caller prints the line.

With --from I, only the reference's iterations from I on are compared (a run resumed from a
checkpoint saved at iteration I - 1).

Usage: tools/gpu/compare_losses.py [--from I] REFERENCE.jsonl RUN.jsonl
"""
import json
import sys


def losses(path):
    try:
        with open(path) as f:
            return {r["iteration"]: r["lm_loss"] for r in map(json.loads, f) if r.get("event") == "train"}
    except (OSError, ValueError):
        return {}


def main():
    args = sys.argv[1:]
    first = 0
    if len(args) == 4 and args[0] == "--from":
        first = int(args[1])
        args = args[2:]
    if len(args) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    ref, run = losses(args[0]), losses(args[1])
    ref = {i: loss for i, loss in ref.items() if i >= first}
    if not ref or sorted(run) != sorted(ref):
        print(f"FAIL ({len(run)} of {len(ref)} iterations)")
        return
    worst, at = max((abs(ref[i] - run[i]) / abs(ref[i]), i) for i in ref)
    print(f"{len(ref)} iterations, max rel lm-loss diff {worst:.2e} (at iteration {at})")


if __name__ == "__main__":
    main()
