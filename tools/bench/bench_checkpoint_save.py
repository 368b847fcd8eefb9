#!/usr/bin/env python3
"""Checkpoint save speed of mgt-train beside dd writing the same bytes to the same disk.

mgt-train trains --save-at iterations on mock data and saves once, synchronously; its log gives
each rank's bytes and write seconds (the "checkpoint write [rank r/n]" lines) and the aggregate
over ranks (all bytes over the slowest rank's time). Then one dd per rank writes as many bytes
as that rank wrote, all at once, into the same directory (dd if=/dev/zero bs=64M oflag=direct
conv=fsync; without oflag=direct where the file system refuses it, which the output says), and
the aggregate GB/s of both and their ratio are printed. mgt-train's write time includes building
the HDF5 files (checksums of each chunk) and their fsync; its copy of the state to host memory
before it (the "host copy") is reported apart.

With --async, a second run saves at --save-at with --async-save and trains --save-at more
iterations: the step time of the iterations during which the background write ran (from the
save until the iteration that published it, included) is compared with the other iterations'
(the first --warmup iterations left out), from the --metrics-file records.

Shapes: tiny (2 layers, hidden 64: for CPU ranks), gpt-1.3b, llama3-8b (Llama 3 8B: 32 layers,
hidden 4096, ffn 14336, 32 heads in 8 groups, vocab 128256, seq 8192, RoPE, RMSNorm, SwiGLU,
untied). --extra passes further mgt-train flags (e.g. "--bf16 --sequence-parallel").
--json FILE appends the figures as one JSON object.

Usage: tools/bench/bench_checkpoint_save.py --bin DIR --dir SCRATCH_DIR_ON_THE_DISK [--ranks N]
       [--tensor-parallel T] [--pipeline-parallel P] [--distributed-optimizer] [--shape tiny]
       [--micro-batch 1] [--save-at 5] [--async] [--warmup 2] [--device cpu|cuda] [--extra FLAGS]
       [--launcher mpiexec] [--keep] [--json FILE]
"""
import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

SHAPES = {
    "tiny": ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "64",
             "--max-position-embeddings", "64", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000"],
    "gpt-1.3b": ["--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048",
                 "--max-position-embeddings", "2048", "--tokenizer-type", "NullTokenizer", "--vocab-size", "50303"],
    "llama3-8b": ["--num-layers", "32", "--hidden-size", "4096", "--ffn-hidden-size", "14336",
                  "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8",
                  "--seq-length", "8192", "--max-position-embeddings", "8192", "--position-embedding-type", "rope",
                  "--normalization", "RMSNorm", "--swiglu", "--untie-embeddings-and-output-weights",
                  "--disable-bias-linear", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128255",
                  "--make-vocab-size-divisible-by", "128"],
}
RANK_LINE = re.compile(r"checkpoint write \[rank (\d+)/(\d+)\]: (\d+) bytes in ([0-9.]+) s, ([0-9.inf]+) GB/s "
                       r"\(host copy ([0-9.]+) s\)")
ALL_LINE = re.compile(r"checkpoint write \[all (\d+) ranks\]: (\d+) bytes in ([0-9.]+) s, ([0-9.inf]+) GB/s aggregate "
                      r"\(iteration (\d+)(, in the background)?\)")
SCHEDULED = re.compile(r"checkpoint of iteration +(\d+) copied to host memory")
SAVED = re.compile(r"successfully saved checkpoint from iteration +(\d+)")
ITERATION = re.compile(r" iteration +(\d+)/")


def train_command(args, save_dir, iters, metrics, asynchronous):
    data_parallel = args.ranks // (args.tensor_parallel * args.pipeline_parallel)
    cmd = [os.path.join(args.bin, "mgt-train"), "--device", args.device] + SHAPES[args.shape] + [
        "--micro-batch-size", str(args.micro_batch), "--global-batch-size", str(args.micro_batch * data_parallel),
        "--lr", "3e-4", "--train-iters", str(iters), "--log-interval", "1", "--eval-iters", "0", "--mock-data",
        "--hidden-dropout", "0", "--attention-dropout", "0", "--save", save_dir, "--save-interval", str(args.save_at),
        "--metrics-file", metrics]
    if args.tensor_parallel > 1:
        cmd += ["--tensor-model-parallel-size", str(args.tensor_parallel)]
    if args.pipeline_parallel > 1:
        cmd += ["--pipeline-model-parallel-size", str(args.pipeline_parallel)]
    if args.distributed_optimizer:
        cmd.append("--use-distributed-optimizer")
    if asynchronous:
        cmd.append("--async-save")
    cmd += shlex.split(args.extra)
    launch = [args.launcher, "-n", str(args.ranks)] if args.ranks > 1 else []
    if launch and "hydra" in subprocess.run([args.launcher, "--version"], capture_output=True, text=True).stdout.lower():
        launch[1:1] = ["-launcher", "fork"]  # Hydra's fork launcher keeps the ranks on this machine
    return launch + cmd


def run(cmd, env):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"mgt-train failed with exit code {proc.returncode}: {' '.join(cmd)}")
    return proc.stdout


def save_figures(log, iteration):
    """The per-rank and aggregate figures of the save of `iteration` in a mgt-train log."""
    ranks, aggregate = {}, None
    for line in log.splitlines():
        m = RANK_LINE.search(line)
        if m and aggregate is None:
            ranks[int(m.group(1))] = {"bytes": int(m.group(3)), "write_s": float(m.group(4)),
                                      "copy_s": float(m.group(6))}
            continue
        m = ALL_LINE.search(line)
        if m and int(m.group(5)) == iteration:
            aggregate = {"ranks": int(m.group(1)), "bytes": int(m.group(2)), "write_s": float(m.group(3))}
            break
        if m:
            ranks = {}  # another save's lines
    if aggregate is None or len(ranks) != aggregate["ranks"]:
        raise SystemExit(f"no complete checkpoint write statistics of iteration {iteration} in the log")
    aggregate["gb_per_s"] = aggregate["bytes"] / 1e9 / aggregate["write_s"] if aggregate["write_s"] > 0 else math.inf
    return [ranks[r] for r in sorted(ranks)], aggregate


def parallel_dd(directory, per_rank_bytes):
    """One dd per rank, started together, each writing that rank's bytes; aggregate GB/s."""
    # At most 64 MiB per block, whole MiB (direct I/O writes whole blocks): each dd writes its
    # rank's bytes rounded up to a MiB per block.
    mib = 1 << 20
    plans = []  # (block size in MiB, count) per rank
    for b in per_rank_bytes:
        count = max(1, math.ceil(b / (64 * mib)))
        plans.append((max(1, math.ceil(b / count / mib)), count))

    def attempt(direct):
        procs = []
        start = time.perf_counter()
        for r, (block, count) in enumerate(plans):
            cmd = ["dd", "if=/dev/zero", f"of={os.path.join(directory, f'dd.rank{r}.bin')}", f"bs={block}M",
                   f"count={count}", "conv=fsync"] + (["oflag=direct"] if direct else [])
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        errors = [p.communicate()[1] for p in procs]
        seconds = time.perf_counter() - start
        ok = all(p.returncode == 0 for p in procs)
        for r in range(len(plans)):
            try:
                os.remove(os.path.join(directory, f"dd.rank{r}.bin"))
            except FileNotFoundError:
                pass
        return ok, seconds, errors

    ok, seconds, errors = attempt(True)
    direct = ok
    if not ok:
        ok, seconds, errors = attempt(False)
        if not ok:
            raise SystemExit("dd failed: " + " ".join(e.strip() for e in errors))
    total = sum(block * count for block, count in plans) * mib
    return {"bytes": total, "seconds": seconds, "gb_per_s": total / 1e9 / seconds, "oflag_direct": direct,
            "processes": len(plans)}


def step_times(metrics, log, save_at, warmup):
    """Step times (ms) of the iterations with the background write in flight, and of the others."""
    times = {}
    for line in open(metrics):
        j = json.loads(line)
        if j.get("event") == "train":
            times[j["iteration"]] = j["elapsed_ms_per_iteration"]
    last_logged, published_after = 0, None
    for line in log.splitlines():
        m = ITERATION.search(line)
        if m:
            last_logged = int(m.group(1))
        m = SAVED.search(line)
        if m and int(m.group(1)) == save_at:
            published_after = last_logged
            break
    if published_after is None:
        raise SystemExit(f"the background save of iteration {save_at} was not published")
    # Iterations save_at+1 … published_after ran beside the writer; the next one published it.
    during = [i for i in times if save_at < i <= published_after + 1]
    others = [i for i in times if i > warmup and i not in during and i != save_at]
    if not others or not during:
        raise SystemExit(f"no iterations to compare: raise --save-at above --warmup + 1 ({warmup + 1})")
    mean = lambda its: sum(times[i] for i in its) / len(its)
    return {"during_iterations": during, "during_ms": mean(during), "normal_ms": mean(others),
            "ratio": mean(during) / mean(others)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--dir", required=True, help="a scratch directory on the disk to measure")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--tensor-parallel", type=int, default=1)
    ap.add_argument("--pipeline-parallel", type=int, default=1)
    ap.add_argument("--distributed-optimizer", action="store_true")
    ap.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--save-at", type=int, default=5)
    ap.add_argument("--async", dest="asynchronous", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--extra", default="")
    ap.add_argument("--launcher", default="mpiexec")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoints written")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    env = dict(os.environ)
    if args.device == "cpu":
        env.setdefault("OPENBLAS_NUM_THREADS", "1")

    result = {"shape": args.shape, "ranks": args.ranks, "tensor_parallel": args.tensor_parallel,
              "pipeline_parallel": args.pipeline_parallel, "distributed_optimizer": args.distributed_optimizer,
              "device": args.device, "dir": os.path.abspath(args.dir), "extra": args.extra}
    sync_dir = os.path.join(args.dir, "ckpt-sync")
    shutil.rmtree(sync_dir, ignore_errors=True)
    cmd = train_command(args, sync_dir, args.save_at, os.path.join(args.dir, "sync.jsonl"), False)
    print("$ " + " ".join(cmd), flush=True)
    ranks, aggregate = save_figures(run(cmd, env), args.save_at)
    if not args.keep:
        shutil.rmtree(sync_dir, ignore_errors=True)
    dd = parallel_dd(args.dir, [r["bytes"] for r in ranks])
    result.update({"save": aggregate, "save_ranks": ranks, "dd": dd, "ratio": aggregate["gb_per_s"] / dd["gb_per_s"],
                   "cmd": " ".join(cmd)})
    for r, figures in enumerate(ranks):
        print(f"rank {r}: {figures['bytes']} bytes written in {figures['write_s']:.3f} s "
              f"({figures['bytes'] / 1e9 / max(figures['write_s'], 1e-9):.3f} GB/s), host copy {figures['copy_s']:.3f} s")
    print(f"mgt-train save: {aggregate['bytes'] / 1e9:.3f} GB by {aggregate['ranks']} ranks in "
          f"{aggregate['write_s']:.3f} s = {aggregate['gb_per_s']:.3f} GB/s aggregate")
    print(f"dd ({dd['processes']} in parallel, {'oflag=direct' if dd['oflag_direct'] else 'page cache'} conv=fsync): "
          f"{dd['bytes'] / 1e9:.3f} GB in {dd['seconds']:.3f} s = {dd['gb_per_s']:.3f} GB/s")
    print(f"ratio mgt/dd: {result['ratio']:.3f}")

    if args.asynchronous:
        async_dir = os.path.join(args.dir, "ckpt-async")
        shutil.rmtree(async_dir, ignore_errors=True)
        metrics = os.path.join(args.dir, "async.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = train_command(args, async_dir, 2 * args.save_at, metrics, True)
        print("$ " + " ".join(cmd), flush=True)
        log = run(cmd, env)
        _, async_aggregate = save_figures(log, args.save_at)
        steps = step_times(metrics, log, args.save_at, args.warmup)
        if not args.keep:
            shutil.rmtree(async_dir, ignore_errors=True)
        result["async"] = {"save": async_aggregate, "steps": steps, "cmd": " ".join(cmd)}
        print(f"async save: {async_aggregate['bytes'] / 1e9:.3f} GB in {async_aggregate['write_s']:.3f} s in the "
              f"background = {async_aggregate['gb_per_s']:.3f} GB/s aggregate")
        print(f"step time: {steps['normal_ms']:.1f} ms normally, {steps['during_ms']:.1f} ms during the background "
              f"write (iterations {steps['during_iterations']}): ratio {steps['ratio']:.3f}")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
