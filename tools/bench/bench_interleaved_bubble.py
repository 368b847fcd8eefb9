#!/usr/bin/env python3
"""The pipeline bubble of mgt-train on CPU ranks: step time at PP=4 (or 2) with Megatron's
non-interleaved 1F1B schedule and with the interleaved one (2 model chunks per rank).

Config "gpt-8L-256H-pp4" (named here so results stay comparable): 8 layers, hidden 256, 4 heads,
sequence 256, micro-batch 1, global batch M (default 8, so M micro-batches per iteration), vocabulary
padded to 1024 (NullTokenizer, mock data), fp32 on the CPU backend (--device cpu), one OpenBLAS
thread per rank, 4 ranks under mpiexec. Each run logs every iteration; the step time is the median of elapsed_ms_per_iteration
over the iterations after the first quarter.

Beside the measured ratio it prints the bubble fractions of the two schedules in theory
(Megatron's (P-1)/M of the ideal time without interleaving, (P-1)/(V*M) with V chunks) and what
they predict for the ratio: (1 + (P-1)/(V*M)) / (1 + (P-1)/M). The ranks need a core each for
the bubble to be idle time; on fewer cores the ranks' waits and work overlap and the ratio
says little.

Usage: tools/bench/bench_interleaved_bubble.py [--build build] [--iters 40] [--microbatches 8]
                                              [--pipeline-size 4]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

V = 2


def run(build, iters, microbatches, interleaved, tmp, P):
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("bench_interleaved_bubble: no mpiexec")
    metrics = os.path.join(tmp, f"metrics-{int(interleaved)}.jsonl")
    cmd = [mpiexec, "-n", str(P), os.path.join(build, "bin", "mgt-train"), "--num-layers", "8",
           "--hidden-size", "256", "--num-attention-heads", "4", "--seq-length", "256",
           "--max-position-embeddings", "256", "--micro-batch-size", "1", "--global-batch-size",
           str(microbatches), "--lr", "3e-4", "--train-iters", str(iters), "--log-interval", "1",
           "--eval-iters", "0", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
           "--pipeline-model-parallel-size", str(P), "--device", "cpu"]
    shown = " ".join(cmd[3:])
    cmd += ["--metrics-file", metrics]
    if interleaved:
        cmd += ["--num-virtual-stages-per-pipeline-rank", str(V)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MGT_NUM_THREADS="1")
    subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in open(metrics) if '"event": "train"' in line]
    steady = [r["elapsed_ms_per_iteration"] for r in rows[len(rows) // 4:]]
    return statistics.median(steady), shown


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--pipeline-size", type=int, default=4, help="P: 2 or 4 (8 layers in chunks of 8 / (2P))")
    args = parser.parse_args()
    m = args.microbatches
    P = args.pipeline_size
    with tempfile.TemporaryDirectory() as tmp:
        plain, cmd = run(args.build, args.iters, m, False, tmp, P)
        interleaved, _ = run(args.build, args.iters, m, True, tmp, P)
    bubble_plain = (P - 1) / m
    bubble_interleaved = (P - 1) / (V * m)
    print(f"config gpt-8L-256H-pp{P}, M={m}, cores on this machine: {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"command: mpiexec -n {P} {cmd} [--num-virtual-stages-per-pipeline-rank {V}]")
    print(f"1F1B            step {plain:8.1f} ms   bubble in theory {bubble_plain:.3f} of the ideal step")
    print(f"interleaved V={V} step {interleaved:8.1f} ms   bubble in theory {bubble_interleaved:.3f}")
    print(f"ratio interleaved/1F1B: measured {interleaved / plain:.3f}, "
          f"in theory {(1 + bubble_interleaved) / (1 + bubble_plain):.3f}")


if __name__ == "__main__":
    main()
