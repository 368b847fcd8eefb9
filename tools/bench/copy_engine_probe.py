#!/usr/bin/env python3
"""Copy engines between two GPUs of one machine: what sequence parallelism's collectives could get.

On a machine with at least two GPUs, with PyTorch: times copies of 8, 16 and 32 MiB between GPU 0
and GPU 1 on the copy engines (tensor.copy_ across devices): one way fetching (the stream of the
GPU that receives) and pushing (the stream of the GPU that sends), and both ways at once, fetching
and pushing. Then four bf16 GEMMs of 4096 x 2048 x 3072 on each GPU, alone and with a 16 MiB
exchange both ways beside them: how much a transfer on the copy engines slows the GEMMs.

Usage: tools/bench/copy_engine_probe.py
"""
import time

import torch


def timed(fn, reps=50):
    """Microseconds per call of fn, both GPUs drained before and after."""
    for _ in range(3):
        fn()
    for d in (0, 1):
        torch.cuda.synchronize(d)
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    for d in (0, 1):
        torch.cuda.synchronize(d)
    return (time.perf_counter() - start) / reps * 1e6


def main():
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    print(f"peer access: {torch.cuda.can_device_access_peer(0, 1)}")
    on0, on1 = torch.cuda.Stream(d0), torch.cuda.Stream(d1)
    for mib in (8, 16, 32):
        n = mib << 19  # bf16 elements
        a0 = torch.empty(n, dtype=torch.bfloat16, device=d0)
        a1 = torch.empty(n, dtype=torch.bfloat16, device=d1)
        b0 = torch.randn(n, device=d0).bfloat16()
        b1 = torch.randn(n, device=d1).bfloat16()

        def fetch_one():
            with torch.cuda.stream(on0):
                a0.copy_(b1, non_blocking=True)

        def push_one():
            with torch.cuda.stream(on0):
                a1.copy_(b0, non_blocking=True)

        def fetch_both():
            with torch.cuda.stream(on0):
                a0.copy_(b1, non_blocking=True)
            with torch.cuda.stream(on1):
                a1.copy_(b0, non_blocking=True)

        def push_both():
            with torch.cuda.stream(on0):
                a1.copy_(b0, non_blocking=True)
            with torch.cuda.stream(on1):
                a0.copy_(b1, non_blocking=True)

        times = {name: timed(fn) for name, fn in
                 (("fetch", fetch_one), ("push", push_one), ("both fetching", fetch_both), ("both pushing", push_both))}
        print(f"{mib} MiB: " + ", ".join(f"{name} {us:.1f} us ({mib * 1.048576 / us * 1e3:.0f} GB/s)"
                                         for name, us in times.items()))

    x = [torch.randn(4096, 2048, device=d).bfloat16() for d in (d0, d1)]
    w = [torch.randn(2048, 3072, device=d).bfloat16() for d in (d0, d1)]
    compute = [torch.cuda.Stream(d0), torch.cuda.Stream(d1)]

    def gemms():
        for _ in range(4):
            for g in (0, 1):
                with torch.cuda.stream(compute[g]):
                    x[g] @ w[g]

    n = 16 << 19
    a0, a1 = (torch.empty(n, dtype=torch.bfloat16, device=d) for d in (d0, d1))
    b0, b1 = (torch.randn(n, device=d).bfloat16() for d in (d0, d1))

    def exchange():
        with torch.cuda.stream(on0):
            a0.copy_(b1, non_blocking=True)
        with torch.cuda.stream(on1):
            a1.copy_(b0, non_blocking=True)

    alone, moved = timed(gemms), timed(exchange)
    together = timed(lambda: (exchange(), gemms()))
    print(f"4 GEMMs 4096x2048x3072 per GPU: {alone:.0f} us alone; 16 MiB both ways {moved:.0f} us alone; "
          f"together {together:.0f} us")


if __name__ == "__main__":
    main()
