#!/usr/bin/env python3
"""NCCL through PyTorch on this machine's GPUs: what the collectives mgt-train issues cost alone, and
what a concurrent all-reduce costs a GEMM stream.

Run one process per GPU (torchrun --nproc-per-node N tools/bench/nccl_peer_gpu.py). Prints, on
rank 0, one line per measurement:
  - all-gather and reduce-scatter of a [tokens, hidden] bf16 activation (sequence parallelism's
    collectives at the 1.3B shape, micro-batch 4) and all-reduce of fp32 gradient buckets, each
    the median of timed repetitions (CUDA events), with the bus bandwidth as nccl-tests defines it;
  - bf16 GEMMs of the 1.3B MLP's shape on one stream, alone and while an fp32 all-reduce of the
    whole 1.3B gradient runs on another: the GEMMs' TFLOP/s both ways, and the SM clock nvidia-smi
    reports meanwhile (a power-capped GPU lowers it).
"""
import argparse
import os
import statistics
import subprocess

import torch
import torch.distributed as dist


def timed(fn, reps):
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def sm_clock(device):
    out = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=clocks.sm,power.draw",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    return out.strip().replace(", ", " MHz, ") + " W"


def sampled_clock(device, work):
    """nvidia-smi's reading while `work` (queued, some hundreds of milliseconds) runs."""
    dist.barrier()
    torch.cuda.synchronize()
    work()
    clock = sm_clock(device)
    torch.cuda.synchronize()
    return clock


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--grad-params", type=float, default=1.3e9)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    world, rank = dist.get_world_size(), dist.get_rank()
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {world} x {torch.cuda.get_device_name()}")

    whole = torch.randn(args.tokens, args.hidden, device="cuda", dtype=torch.bfloat16)
    part = torch.randn(args.tokens // world, args.hidden, device="cuda", dtype=torch.bfloat16)
    mb = whole.numel() * 2 / 2**20
    ms = timed(lambda: dist.all_gather_into_tensor(whole, part), args.reps)
    say(f"all-gather bf16 [{args.tokens}, {args.hidden}] ({mb:.1f} MiB): {ms:.3f} ms, "
        f"bus {whole.numel() * 2 * (world - 1) / world / ms / 1e6:.0f} GB/s")
    ms = timed(lambda: dist.reduce_scatter_tensor(part, whole), args.reps)
    say(f"reduce-scatter bf16 [{args.tokens}, {args.hidden}] ({mb:.1f} MiB): {ms:.3f} ms, "
        f"bus {whole.numel() * 2 * (world - 1) / world / ms / 1e6:.0f} GB/s")
    for params in (10_000_000, 40_000_000):
        bucket = torch.randn(params, device="cuda")
        ms = timed(lambda: dist.all_reduce(bucket), args.reps)
        say(f"all-reduce fp32 bucket of {params / 1e6:.0f}M: {ms:.3f} ms, "
            f"bus {params * 4 * 2 * (world - 1) / world / ms / 1e6:.0f} GB/s")
    del bucket

    grads = torch.randn(int(args.grad_params), device="cuda")
    a = torch.randn(args.tokens, args.hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4 * args.hidden, args.hidden, device="cuda", dtype=torch.bfloat16)
    flop = 2 * args.tokens * args.hidden * 4 * args.hidden
    ms_ar = timed(lambda: dist.all_reduce(grads), 3)
    reps = max(1, int(ms_ar / (flop / 600e9)))  # GEMMs for about as long as the all-reduce
    gemms = lambda: [torch.matmul(a, w.t()) for _ in range(reps)]
    alone = timed(gemms, 3)
    clock = sampled_clock(local, lambda: [gemms() for _ in range(20)])
    say(f"all-reduce fp32 of {args.grad_params / 1e9:.1f}B alone: {ms_ar:.2f} ms; "
        f"{reps} GEMMs [{args.tokens}x{args.hidden}]x[{args.hidden}x{4 * args.hidden}] alone: {alone:.2f} ms "
        f"({reps * flop / alone / 1e9:.0f} TFLOP/s), clock {clock}")
    side = torch.cuda.Stream()

    def both():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            dist.all_reduce(grads)
        gemms()
        torch.cuda.current_stream().wait_stream(side)

    together = timed(both, 3)
    # The GEMMs' own time beside the reduction: events on the compute stream only.
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier()
    torch.cuda.synchronize()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dist.all_reduce(grads)
    s.record()
    gemms()
    e.record()
    torch.cuda.synchronize()
    beside = s.elapsed_time(e)
    clock = sampled_clock(local, lambda: [both() for _ in range(20)])
    say(f"both on two streams: {together:.2f} ms (sum alone {alone + ms_ar:.2f}, longer alone "
        f"{max(alone, ms_ar):.2f}); the GEMMs beside the all-reduce: {beside:.2f} ms "
        f"({reps * flop / beside / 1e9:.0f} TFLOP/s, {beside / alone - 1:+.1%}), clock {clock}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
