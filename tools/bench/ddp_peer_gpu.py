#!/usr/bin/env python3
"""The data-parallel peer: PyTorch DDP of Hugging Face's GPT2LMHeadModel on N GPUs of this machine.

The model, precision and optimizer of bench_train_gpu.py's peer (SDPA attention, bf16 autocast,
fused AdamW, clip 1.0, torch.compile, no dropout), wrapped in DistributedDataParallel (NCCL,
gradients reduced in buckets during the backward, as DDP does by default), one process per GPU,
each at --micro-batch, --accumulate micro-batches per step (default 1): global batch
micro-batch x accumulate x N. Prints one JSON line: tokens/s of the job and
per GPU over the timed steps (after 3 warm-up steps), and the peak memory of GPU 0.

Usage: tools/bench/ddp_peer_gpu.py --gpus N [--shape gpt-1.3b] [--micro-batch 4] [--accumulate 1] [--iters 20]
       [--json FILE]
(it starts its N processes itself, through torch.distributed.run)
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train_gpu import SHAPES, VOCAB  # noqa: E402


def worker(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformers import GPT2Config, GPT2LMHeadModel

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    layers, hidden, heads, seq = SHAPES[args.shape]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=seq, n_embd=hidden, n_layer=layers, n_head=heads,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).cuda().train()
    ddp = DistributedDataParallel(model, gradient_as_bucket_view=True)
    compiled = torch.compile(ddp)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, fused=True)
    generator = torch.Generator(device="cuda").manual_seed(1 + rank)
    tokens = torch.randint(0, 50257, (args.micro_batch, seq + 1), device="cuda", generator=generator)

    def step():
        # DDP reduces in the last micro-batch's backward only (no_sync before it), as
        # mgt-train's --overlap-grad-reduce does.
        for micro in range(args.accumulate):
            last = micro == args.accumulate - 1
            with contextlib.nullcontext() if last else ddp.no_sync():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    # transformers shifts the labels itself (labels = the inputs), as its users pass them.
                    loss = compiled(input_ids=tokens[:, :-1], labels=tokens[:, :-1]).loss
                (loss / args.accumulate).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.iters):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    seconds = (time.perf_counter() - start) / args.iters
    if rank == 0:
        per_gpu = args.micro_batch * args.accumulate * seq / seconds
        result = {"peer": "pytorch-ddp", "torch": torch.__version__, "shape": args.shape, "gpus": world,
                  "micro_batch": args.micro_batch, "accumulate": args.accumulate, "tokens_per_second": per_gpu * world,
                  "tokens_per_second_per_gpu": per_gpu, "peak_mib": torch.cuda.max_memory_allocated() / 2**20}
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(result) + "\n")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--shape", default="gpt-1.3b", choices=sorted(SHAPES))
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--accumulate", type=int, default=1, help="micro-batches per step")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.gpus < 1:
        ap.error("--gpus must be positive")
    forwarded = ["--shape", args.shape, "--micro-batch", str(args.micro_batch), "--iters", str(args.iters),
                 "--accumulate", str(args.accumulate)]
    if args.json:
        forwarded += ["--json", args.json]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.gpus}",
           os.path.abspath(__file__), "--worker", *forwarded]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
