#!/usr/bin/env python3
"""CPU training throughput of mgt-train, beside PyTorch on the same model shape.

Config "gpt-4L-256H" (named here so results stay comparable): 4 layers, hidden 256, 4 heads,
sequence 256, micro-batch 4, global batch 4, GPT-2 vocabulary padded to 50304, learned
positions, LayerNorm, GeLU, tied embeddings, fp32, AdamW, dropout 0.1. mgt-train runs on
Megatron's --mock-data; the peer is Hugging Face's GPT2LMHeadModel with the same shape on
PyTorch's CPU backend, timed over the same number of steps after the same warm-up, with the
same thread count. Reported: tokens per second (global batch x sequence / seconds per step).

Usage: tools/bench/bench_train_cpu.py [--build build] [--iters 20] [--threads 2]
The peer needs `pip install torch transformers`; without them only mgt is measured.
"""
import argparse
import os
import json
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")
LAYERS, HIDDEN, HEADS, SEQ, MBS, VOCAB = 4, 256, 4, 256, 4, 50304


def run_mgt(build, iters, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    log_interval = max(1, iters // 2)
    cmd = [os.path.join(build, "bin", "mgt-train"), "--num-layers", str(LAYERS), "--hidden-size",
           str(HIDDEN), "--num-attention-heads", str(HEADS), "--seq-length", str(SEQ),
           "--max-position-embeddings", str(SEQ), "--micro-batch-size", str(MBS), "--global-batch-size",
           str(MBS), "--lr", "3e-4", "--train-iters", str(iters), "--log-interval", str(log_interval),
           "--eval-iters", "0", "--mock-data", "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file",
           os.path.join(DATA, "gpt2-vocab.json"), "--merge-file", os.path.join(DATA, "gpt2-merges.txt"),
           "--log-throughput"]
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        subprocess.run(cmd + ["--metrics-file", metrics], env=env, capture_output=True, text=True,
                       check=True)
        rows = [json.loads(line) for line in open(metrics) if '"event": "train"' in line]
    # The first interval includes start-up and warm-up; the last one is the steady state.
    last = rows[-1]
    return (last["tokens_per_second"], last["tflops_per_gpu"], [r["lm_loss"] for r in rows],
            " ".join(cmd))


def run_torch(iters, threads):
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as e:
        return None, f"not measured ({e})"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                        activation_function="gelu", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)
    model = GPT2LMHeadModel(config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    tokens = torch.randint(0, 50257, (MBS, SEQ + 1))

    def step():
        out = model(input_ids=tokens[:, :-1], labels=tokens[:, :-1])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    warmup = max(1, iters // 2)
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(iters - warmup):
        step()
    seconds = (time.perf_counter() - start) / (iters - warmup)
    return MBS * SEQ / seconds, f"torch {torch.__version__}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    rate, tflops, losses, cmd = run_mgt(args.build, args.iters, args.threads)
    print(f"config gpt-4L-256H: {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, seq {SEQ}, "
          f"micro-batch {MBS}, vocab {VOCAB}, {args.threads} threads")
    print(f"mgt-train: {rate:.0f} tokens/s ({tflops:.3f} TFLOP/s by Megatron's formula), "
          f"lm loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    print(f"  {cmd}")
    peer, what = run_torch(args.iters, args.threads)
    if peer is None:
        print(f"PyTorch peer: {what}")
    else:
        print(f"PyTorch peer ({what}, GPT2LMHeadModel, fp32): {peer:.0f} tokens/s; "
              f"mgt/PyTorch = {rate / peer:.2f}")


if __name__ == "__main__":
    sys.exit(main())
