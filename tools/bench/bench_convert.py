#!/usr/bin/env python3
"""Checkpoint resharding speed: mgt-ckpt-convert between tensor-parallel layouts beside `cp -r`.

Trains a GPT for one iteration on mock data and saves it (weights and Adam's two moments), turns
that checkpoint into the source layout with mgt-ckpt-convert, then times, in alternation,
`mgt-ckpt-convert --target-tensor-parallel-size T` (source layout -> T, optimizer state
included, each file fsynced before the directory is published) and `cp -r` of the same
iteration directory followed by `sync` (the copy made as durable as the conversion's), and
reports the best of --repeats runs of each, the ratio, the bytes per second and the converter's
peak RSS (GNU time's %M) beside the size of the largest tensor: a streamed conversion stays
near twice that, whatever the checkpoint's size.

Usage: tools/bench/bench_convert.py [--build build-cpu] [--hidden-size 512] [--num-layers 8]
                                    [--source-tp 2] [--target-tp 4] [--repeats 3]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")


def run(cmd, **kw):
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def timed(cmd):
    """Wall seconds and peak RSS in KiB of `cmd`, run under GNU time."""
    start = time.perf_counter()
    result = run(["/usr/bin/time", "-f", "%M"] + cmd)
    seconds = time.perf_counter() - start
    return seconds, int(result.stderr.strip().splitlines()[-1]), result


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-cpu")
    ap.add_argument("--hidden-size", type=int, default=512)
    ap.add_argument("--num-layers", type=int, default=8)
    ap.add_argument("--source-tp", type=int, default=2)
    ap.add_argument("--target-tp", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", help="scratch directory (default: a temporary one)")
    a = ap.parse_args()
    bin_dir = os.path.join(a.build, "bin")
    work = a.work or tempfile.mkdtemp(prefix="bench_convert_")
    os.makedirs(work, exist_ok=True)
    try:
        trained = os.path.join(work, "trained")
        heads = max(1, a.hidden_size // 64)
        run([os.path.join(bin_dir, "mgt-train"), "--num-layers", str(a.num_layers), "--hidden-size",
             str(a.hidden_size), "--num-attention-heads", str(heads), "--seq-length", "64",
             "--max-position-embeddings", "64", "--micro-batch-size", "1", "--lr", "1e-4", "--train-iters", "1",
             "--log-interval", "1", "--eval-iters", "0", "--mock-data", "--tokenizer-type", "GPT2BPETokenizer",
             "--vocab-file", os.path.join(DATA, "gpt2-vocab.json"), "--merge-file",
             os.path.join(DATA, "gpt2-merges.txt"), "--save", trained, "--save-interval", "1"])
        convert = [os.path.join(bin_dir, "mgt-ckpt-convert"), "--model-type", "GPT", "--loader", "mgt",
                   "--saver", "mgt"]
        source = os.path.join(work, "source")
        run(convert + ["--load-dir", trained, "--save-dir", source, "--target-tensor-parallel-size",
                       str(a.source_tp)])
        source_iter = os.path.join(source, "iter_0000001")
        size = directory_bytes(source_iter)
        largest = 0
        convert_runs, copy_runs = [], []
        for i in range(a.repeats):
            out = os.path.join(work, f"converted-{i}")
            seconds, rss, result = timed(convert + ["--load-dir", source, "--save-dir", out,
                                                    "--target-tensor-parallel-size", str(a.target_tp)])
            summary = json.loads(result.stdout)
            convert_runs.append((seconds, rss, summary["gb_per_second"]))
            shutil.rmtree(out)
            copy = os.path.join(work, f"copy-{i}")
            start = time.perf_counter()
            run(["cp", "-r", source_iter, copy])
            run(["sync"])
            copy_runs.append(time.perf_counter() - start)
            shutil.rmtree(copy)
        # The largest tensor: the word embedding, padded vocabulary x hidden, fp32.
        largest = 50304 * a.hidden_size * 4
        best_convert = min(convert_runs)
        best_copy = min(copy_runs)
        print(f"checkpoint: {a.num_layers} layers, hidden {a.hidden_size}, {size / 1e6:.1f} MB in "
              f"{len(os.listdir(source_iter))} files (TP={a.source_tp}), weights + 2 Adam moments")
        print(f"| | seconds (best of {a.repeats}) | MB/s | peak RSS |")
        print("|---|---|---|---|")
        print(f"| mgt-ckpt-convert TP={a.source_tp} -> TP={a.target_tp} | {best_convert[0]:.2f} | "
              f"{size / 1e6 / best_convert[0]:.0f} | {best_convert[1] / 1024:.0f} MiB |")
        print(f"| cp -r + sync | {best_copy:.2f} | {size / 1e6 / best_copy:.0f} | |")
        print(f"conversion / copy time: {best_convert[0] / best_copy:.2f}x; converter's own rate "
              f"{best_convert[2]:.3f} GB/s; largest tensor {largest / 2**20:.0f} MiB, "
              f"peak RSS {best_convert[1] / 1024:.0f} MiB (all runs: "
              f"{', '.join(f'{r / 1024:.0f}' for _, r, _ in convert_runs)} MiB)")
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
