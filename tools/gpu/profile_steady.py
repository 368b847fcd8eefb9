#!/usr/bin/env python3
"""The steady-state GPU time per operation of an mgt-train run, from its --profile report.

The run profiles ITERS iterations after the first ones (--profile --profile-step-start N
--profile-step-end N+ITERS), so that the first iterations' plan builds and warm-up stay out; the
table is divided by ITERS. With --against, a second such report (a baseline, e.g. one GPU against
a parallel layout) is shown beside it and the rows are sorted by how much longer they take than
there.

  profile_steady.py LOG ITERS [--against LOG0 [--scale F]] [--top N] [--rank R]

--scale F multiplies the baseline's times (0.5 against one GPU for a layout that splits each
operation over two).

--rank R reads only the lines of rank R in logs written with mpiexec's -prepend-rank ("[R] ..."),
the baseline's too.
The first output line sums the table: GPU time (the events' spans), host time issuing the
operations, and the host's waits for the stream.
"""
import argparse
import re
import sys

ROW = re.compile(r"^\s+(\S+)\s+([0-9.]+) ms\s+[0-9.]+%\s+(\d+) calls\s+([0-9.]+) ms host")
BLOCKED = re.compile(r"host_blocked\s+([0-9.]+) ms in (\d+) waits")


def report(path, rank):
    ops, blocked = {}, (0.0, 0)
    prefix = f"[{rank}] " if rank is not None else None
    with open(path, errors="replace") as f:
        for line in f:
            if prefix is not None:
                if not line.startswith(prefix):
                    continue
                line = line[len(prefix):]
            if m := ROW.match(line):
                ops[m.group(1)] = (float(m.group(2)), int(m.group(3)), float(m.group(4)))
            elif m := BLOCKED.search(line):
                blocked = (float(m.group(1)), int(m.group(2)))
    if not ops:
        sys.exit(f"profile_steady.py: {path}: no --profile report" + (f" of rank {rank}" if prefix else ""))
    return ops, blocked


def steady(path, iters, rank):
    ops, (blocked_ms, waits) = report(path, rank)
    per_op = {k: (ms / iters, calls // iters, host / iters) for k, (ms, calls, host) in ops.items()}
    return per_op, (blocked_ms / iters, waits // iters)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("iters", type=int, help="the iterations the report covers")
    ap.add_argument("--against", metavar="LOG0")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the baseline's times")
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--rank", type=int)
    args = ap.parse_args()
    if args.iters <= 0:
        ap.error("ITERS must be positive")
    ops, (blocked_ms, waits) = steady(args.log, args.iters, args.rank)
    total = sum(v[0] for v in ops.values())
    host = sum(v[2] for v in ops.values())
    print(f"steady-state per iteration: GPU {total:.2f} ms (event spans), host issuing {host:.2f} ms, "
          f"host blocked {blocked_ms:.2f} ms in {waits} waits")
    if not args.against:
        for k, (ms, calls, host_ms) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:args.top]:
            print(f"  {k:28s} {ms:8.3f} ms {100 * ms / total:5.1f}% {calls:6d} calls  host {host_ms:7.3f} ms")
        return
    base, _ = steady(args.against, args.iters, args.rank)
    base = {k: (v[0] * args.scale, v[1], v[2]) for k, v in base.items()}
    base_total = sum(v[0] for v in base.values())
    scaled = f" x {args.scale:g}" if args.scale != 1.0 else ""
    print(f"  baseline{scaled} GPU {base_total:.2f} ms; per operation: here, baseline{scaled}, difference")
    rows = sorted(set(ops) | set(base), key=lambda k: -(ops.get(k, (0.0,))[0] - base.get(k, (0.0,))[0]))
    for k in rows[:args.top]:
        here, there = ops.get(k, (0.0, 0))[0], base.get(k, (0.0, 0))[0]
        print(f"  {k:28s} {here:8.3f} ms {there:8.3f} ms {here - there:+8.3f} ms  "
              f"{ops.get(k, (0, 0))[1]:6d} / {base.get(k, (0, 0))[1]:6d} calls")


if __name__ == "__main__":
    main()
