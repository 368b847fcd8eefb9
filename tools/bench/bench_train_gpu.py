#!/usr/bin/env python3
"""GPU training throughput of mgt-train beside a PyTorch GPT-2 on the same GPU, shape and batch.

Shapes (named so results stay comparable):
  gpt2-124m: 12 layers, hidden 768, 12 heads, seq 1024, vocab 50304 (padded GPT-2)
  gpt-1.3b:  24 layers, hidden 2048, 16 heads, seq 2048, vocab 50304
mgt-train runs on Megatron's --mock-data with learned positions, LayerNorm, GeLU, tied embeddings,
no dropout, AdamW, clip 1.0. The peer is Hugging Face's GPT2LMHeadModel (SDPA attention, bf16
autocast, fused AdamW, torch.compile) with the same shape and micro-batch. Reported: tokens/s over
the steady-state steps, MFU against 989 TFLOP/s with Megatron's FLOP formula (the one mgt-train
logs), peak GPU memory, and the ratio mgt/peer.

Usage: tools/bench/bench_train_gpu.py --bin DIR [--shape gpt2-124m] [--micro-batch 8]
       [--iters 20] [--precision fp32|bf16] [--no-peer]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")
SHAPES = {"gpt2-124m": (12, 768, 12, 1024), "gpt-1.3b": (24, 2048, 16, 2048)}
VOCAB = 50304
PEAK_TFLOPS = 989.0


class GpuMemoryPeak:
    """Samples nvidia-smi's used memory every 50 ms (mgt has no allocator statistics yet)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                self.peak = max(self.peak, int(out.split()[0]))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_mgt(bindir, shape, mbs, iters, precision):
    layers, hidden, heads, seq = SHAPES[shape]
    cmd = [os.path.join(bindir, "mgt-train"), "--device", "cuda", "--num-layers", str(layers),
           "--hidden-size", str(hidden), "--num-attention-heads", str(heads), "--seq-length", str(seq),
           "--max-position-embeddings", str(seq), "--micro-batch-size", str(mbs), "--global-batch-size",
           str(mbs), "--lr", "3e-4", "--train-iters", str(iters), "--log-interval", "5", "--eval-iters", "0",
           "--hidden-dropout", "0", "--attention-dropout", "0", "--mock-data", "--tokenizer-type",
           "GPT2BPETokenizer", "--vocab-file", os.path.join(DATA, "gpt2-vocab.json"), "--merge-file",
           os.path.join(DATA, "gpt2-merges.txt"), "--log-throughput"]
    if precision == "bf16":
        cmd.append("--bf16")
    with tempfile.TemporaryDirectory() as tmp, GpuMemoryPeak() as memory:
        metrics = os.path.join(tmp, "metrics.jsonl")
        proc = subprocess.run(cmd + ["--metrics-file", metrics], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit(f"mgt-train failed with exit code {proc.returncode}")
        rows = [json.loads(line) for line in open(metrics) if '"event": "train"' in line]
    last = rows[-1]  # the first interval includes start-up
    # FLOPs per token by Megatron's formula, as mgt-train logs them: the peer is rated with it too.
    flops_per_token = last["tflops_per_gpu"] * 1e12 / last["tokens_per_second"]
    return {"tokens_per_second": last["tokens_per_second"], "peak_mib": memory.peak,
            "flops_per_token": flops_per_token,
            "loss": [r["lm_loss"] for r in rows], "cmd": " ".join(cmd)}


def run_peer(shape, mbs, iters):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    layers, hidden, heads, seq = SHAPES[shape]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=seq, n_embd=hidden, n_layer=layers, n_head=heads,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, fused=True)
    compiled = torch.compile(model)
    tokens = torch.randint(0, 50257, (mbs, seq + 1), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = compiled(input_ids=tokens[:, :-1], labels=tokens[:, 1:]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    return {"tokens_per_second": mbs * seq / seconds,
            "peak_mib": torch.cuda.max_memory_allocated() / 2**20, "version": torch.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shape", default="gpt2-124m", choices=sorted(SHAPES))
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--no-peer", action="store_true")
    args = ap.parse_args()
    mgt = run_mgt(args.bin, args.shape, args.micro_batch, args.iters, args.precision)
    fpt = mgt["flops_per_token"]
    mfu = mgt["tokens_per_second"] * fpt / 1e12 / PEAK_TFLOPS
    print(f"{args.shape} mbs {args.micro_batch}: mgt ({args.precision}) {mgt['tokens_per_second']:.0f} tokens/s, "
          f"MFU {100 * mfu:.1f}%, peak {mgt['peak_mib']} MiB (nvidia-smi), "
          f"loss {mgt['loss'][0]:.3f} -> {mgt['loss'][-1]:.3f}")
    print(f"  {mgt['cmd']}")
    if not args.no_peer:
        peer = run_peer(args.shape, args.micro_batch, args.iters)
        peer_mfu = peer["tokens_per_second"] * fpt / 1e12 / PEAK_TFLOPS
        print(f"{args.shape} mbs {args.micro_batch}: peer (torch {peer['version']}, bf16 autocast, compile) "
              f"{peer['tokens_per_second']:.0f} tokens/s, MFU {100 * peer_mfu:.1f}%, peak {peer['peak_mib']:.0f} MiB; "
              f"mgt/peer = {mgt['tokens_per_second'] / peer['tokens_per_second']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
