#!/usr/bin/env python3
"""GPU training throughput of mgt-train beside a PyTorch GPT-2 on the same GPU, shape and batch.

Shapes (named so results stay comparable):
  gpt2-124m: 12 layers, hidden 768, 12 heads, seq 1024, vocab 50304 (padded GPT-2)
  gpt-1.3b:  24 layers, hidden 2048, 16 heads, seq 2048, vocab 50304
  tiny:      2 layers, hidden 64, 4 heads, seq 64 (for trying the script on CPU ranks)
mgt-train runs on Megatron's --mock-data with learned positions, LayerNorm, GeLU, tied embeddings,
no dropout, AdamW, clip 1.0. The peer is Hugging Face's GPT2LMHeadModel (SDPA attention, bf16
autocast, or fp16 autocast with its dynamic GradScaler for --precision fp16, fused AdamW,
torch.compile) with the same shape and micro-batch. Reported: tokens/s over
the steady-state steps, MFU against 989 TFLOP/s with Megatron's FLOP formula (the one mgt-train
logs), peak GPU memory, and the ratio mgt/peer.

With --ranks N, mgt-train runs as N ranks under MPICH's launcher (one GPU each, communicating
over NCCL), --tensor-parallel T of them per model replica (--sequence-parallel adds sequence
parallelism) and the rest data-parallel, each replica at --micro-batch (global batch micro-batch x
data-parallel size); tokens/s is then also given per GPU, and the transport mgt-train chose.
--distributed-optimizer adds --use-distributed-optimizer; --overlap adds --overlap-grad-reduce (and
--overlap-param-gather with the distributed optimizer): the data-parallel reduction (and the
weights' all-gather) bucket by bucket, beside the compute.
--fp8 FORMAT (e4m3 or hybrid) trains mgt's transformer layers' linears in FP8 (with --precision bf16
or fp16) by the recipe of Megatron's Llama 3 8B FP8 script: delayed scaling, an amax history of
1024, its max (--fp8-recipe tensorwise for current scaling instead).
With --accumulate K, each iteration accumulates the gradients of K micro-batches before the
optimizer's step (global batch K x micro-batch x data-parallel size), in mgt and in the peer alike:
how a model is trained in practice, the step's fixed costs (AdamW, the gradient norm) spread over
K micro-batches.
--extra "FLAGS" appends more mgt-train flags (e.g. "--no-fp8-norm-casts").
--json FILE appends the figures as one JSON object per run.

Usage: tools/bench/bench_train_gpu.py --bin DIR [--shape gpt2-124m] [--micro-batch 8]
       [--iters 20] [--accumulate 1] [--precision fp32|bf16|fp16] [--fp8 e4m3|hybrid [--fp8-recipe R]] [--no-peer] [--ranks N [--tensor-parallel T]
       [--sequence-parallel] [--distributed-optimizer] [--overlap] [--launcher mpiexec.hydra]] [--device cuda|cpu] [--extra "FLAGS"] [--json FILE]
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")
SHAPES = {"gpt2-124m": (12, 768, 12, 1024), "gpt-1.3b": (24, 2048, 16, 2048), "tiny": (2, 64, 4, 64)}
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
                self.peak = max([self.peak] + [int(line) for line in out.split()])  # the fullest GPU
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def wall_tokens_per_second(log, tokens_per_iteration):
    """Tokens/s by the wall clock of the log lines' own time stamps, from the first logged
    iteration to the last: start-up and the first interval are left out, and nothing the program
    computes about its rate enters it. None with fewer than two logged iterations."""
    stamps = re.findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] iteration\s+(\d+)/", log)
    if len(stamps) < 2:
        return None
    (t0, i0), (t1, i1) = stamps[0], stamps[-1]
    seconds = (datetime.datetime.fromisoformat(t1) - datetime.datetime.fromisoformat(t0)).total_seconds()
    return (int(i1) - int(i0)) * tokens_per_iteration / seconds if seconds > 0 else None


def run_mgt(bindir, shape, mbs, iters, precision, ranks=1, tensor_parallel=1, sequence_parallel=False,
            device="cuda", launcher="mpiexec.hydra", accumulate=1, overlap=False,
            distributed_optimizer=False, dp_collectives="copy-engines", fp8=None, fp8_recipe="delayed", extra=()):
    layers, hidden, heads, seq = SHAPES[shape]
    data_parallel = ranks // tensor_parallel
    cmd = [os.path.join(bindir, "mgt-train"), "--device", device, "--num-layers", str(layers),
           "--hidden-size", str(hidden), "--num-attention-heads", str(heads), "--seq-length", str(seq),
           "--max-position-embeddings", str(seq), "--micro-batch-size", str(mbs), "--global-batch-size",
           str(mbs * data_parallel * accumulate), "--lr", "3e-4", "--train-iters", str(iters), "--log-interval", "5",
           "--eval-iters", "0", "--hidden-dropout", "0", "--attention-dropout", "0", "--mock-data",
           "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", os.path.join(DATA, "gpt2-vocab.json"),
           "--merge-file", os.path.join(DATA, "gpt2-merges.txt"), "--log-throughput"]
    if precision in ("bf16", "fp16"):
        cmd.append("--" + precision)
    if fp8:
        cmd += ["--fp8-format", fp8]
        cmd += (["--fp8-recipe", "tensorwise"] if fp8_recipe == "tensorwise"
                else ["--fp8-amax-history-len", "1024", "--fp8-amax-compute-algo", "max"])
    if tensor_parallel > 1:
        cmd += ["--tensor-model-parallel-size", str(tensor_parallel)]
    if sequence_parallel:
        cmd.append("--sequence-parallel")
    if distributed_optimizer:
        cmd.append("--use-distributed-optimizer")
    if overlap:
        cmd += ["--overlap-grad-reduce"] + (["--overlap-param-gather"] if distributed_optimizer else [])
    if dp_collectives != "copy-engines":  # mgt-train's default: binaries older than the flag run too
        cmd += ["--dp-collectives", dp_collectives]
    cmd += list(extra)
    # Hydra's fork launcher keeps the ranks on this machine.
    launch = [launcher, "-launcher", "fork", "-n", str(ranks)] if ranks > 1 else []
    with tempfile.TemporaryDirectory() as tmp, GpuMemoryPeak() as memory:
        metrics = os.path.join(tmp, "metrics.jsonl")
        proc = subprocess.run(launch + cmd + ["--metrics-file", metrics], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit(f"mgt-train failed with exit code {proc.returncode}")
        rows = [json.loads(line) for line in open(metrics) if '"event": "train"' in line]
    last = rows[-1]  # the first interval includes start-up
    # FLOPs per token by Megatron's formula, as mgt-train logs them: the peer is rated with it too.
    # tflops_per_gpu divides the iteration's FLOPs by the ranks; tokens_per_second is the job's.
    flops_per_token = last["tflops_per_gpu"] * 1e12 * ranks / last["tokens_per_second"]
    transport = next((line.split("communication: ", 1)[1] for line in proc.stderr.splitlines()
                      if "communication: " in line), "none (one rank)")
    # The allocator's own peak (Megatron's report_memory line), what torch.cuda.max_memory_allocated
    # gives the peer; nvidia-smi's figure adds the CUDA context and libraries' memory.
    allocated = re.search(r"max allocated: ([0-9.]+)", proc.stdout + proc.stderr)
    wall = wall_tokens_per_second(proc.stdout + proc.stderr, mbs * seq * data_parallel * accumulate)
    return {"tokens_per_second": last["tokens_per_second"], "tokens_per_second_per_gpu": last["tokens_per_second"] / ranks,
            "wall_tokens_per_second": wall,
            "peak_mib": memory.peak, "flops_per_token": flops_per_token, "transport": transport,
            "max_allocated_mib": float(allocated.group(1)) if allocated else None,
            "loss": [r.get("lm_loss", float("nan")) for r in rows], "cmd": " ".join(launch + cmd),
            # Over NCCL: the data-parallel collectives' time per iteration (on the communication
            # stream with --overlap), and the part of it the compute stream waited for (CUDA events).
            "comm_ms": last.get("data_parallel_comm_ms"), "comm_exposed_ms": last.get("data_parallel_comm_exposed_ms"),
            # The tensor-parallel collectives' time on either stream, and the part the compute
            # stream spent in them or waiting for them (CUDA events).
            "tp_comm_ms": last.get("tensor_parallel_comm_ms"),
            "tp_comm_exposed_ms": last.get("tensor_parallel_comm_exposed_ms"),
            # The same two by operation and stream: {"all_gather beside": {"ms", "exposed_ms", "count"}}.
            "tp_comm_by_operation": last.get("tensor_parallel_comm_by_operation") or {},
            "comm_by_operation": last.get("data_parallel_comm_by_operation") or {},
            # The step's phases on the compute stream (CUDA events), per iteration.
            "phases_ms": {k: last.get(k + "_ms") for k in ("forward_backward", "grads_sync", "optimizer")},
            # Where the data-parallel collectives ran between the GPUs of one machine
            # (mgt-train's --dp-collectives).
            "dp_collectives": dp_collectives}

def run_peer(shape, mbs, iters, accumulate=1, precision="bf16"):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    layers, hidden, heads, seq = SHAPES[shape]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=seq, n_embd=hidden, n_layer=layers, n_head=heads,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, fused=True)
    compiled = torch.compile(model)
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    # fp16 needs loss scaling, as mgt's --fp16 does (dynamic, from 2^16).
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    tokens = torch.randint(0, 50257, (mbs, seq + 1), device="cuda")

    def step():
        for _ in range(accumulate):
            with torch.autocast("cuda", dtype=dtype):
                # transformers shifts the labels itself (labels = the inputs), as its users pass them.
                loss = compiled(input_ids=tokens[:, :-1], labels=tokens[:, :-1]).loss
            scaler.scale(loss / accumulate).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
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
    return {"tokens_per_second": accumulate * mbs * seq / seconds,
            "peak_mib": torch.cuda.max_memory_allocated() / 2**20, "version": torch.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shape", default="gpt2-124m", choices=sorted(SHAPES))
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--fp8", choices=["e4m3", "hybrid"])
    ap.add_argument("--fp8-recipe", default="delayed", choices=["delayed", "tensorwise"])
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--tensor-parallel", type=int, default=1)
    ap.add_argument("--sequence-parallel", action="store_true")
    ap.add_argument("--distributed-optimizer", action="store_true", help="--use-distributed-optimizer")
    ap.add_argument("--overlap", action="store_true",
                    help="--overlap-grad-reduce (and --overlap-param-gather with the distributed optimizer)")
    ap.add_argument("--dp-collectives", default="copy-engines", choices=["copy-engines", "nccl"],
                    help="mgt-train's --dp-collectives")
    ap.add_argument("--launcher", default="mpiexec.hydra")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--extra", default="", help="more mgt-train flags, one string (e.g. \"--no-fp8-norm-casts\")")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.accumulate < 1:
        ap.error("--accumulate must be positive")
    if args.ranks < 1 or args.tensor_parallel < 1 or args.ranks % args.tensor_parallel:
        ap.error("--ranks must be a positive multiple of --tensor-parallel")
    mgt = run_mgt(args.bin, args.shape, args.micro_batch, args.iters, args.precision, args.ranks,
                  args.tensor_parallel, args.sequence_parallel, args.device, args.launcher, args.accumulate,
                  args.overlap, args.distributed_optimizer, args.dp_collectives, args.fp8, args.fp8_recipe,
                  args.extra.split())
    what = f"{args.shape} mbs {args.micro_batch}" + (f" x {args.accumulate}" if args.accumulate > 1 else "")
    fpt = mgt["flops_per_token"]
    mfu = mgt["tokens_per_second_per_gpu"] * fpt / 1e12 / PEAK_TFLOPS
    if args.ranks == 1:
        precision = args.precision + (f" + fp8 {args.fp8} {args.fp8_recipe}" if args.fp8 else "")
        print(f"{what}: mgt ({precision}) {mgt['tokens_per_second']:.0f} tokens/s, "
              f"MFU {100 * mfu:.1f}%, peak {mgt['peak_mib']} MiB (nvidia-smi; max allocated "
              f"{mgt['max_allocated_mib'] or 0:.0f} MiB), loss {mgt['loss'][0]:.3f} -> {mgt['loss'][-1]:.3f}; "
              f"wall clock of the log's time stamps {mgt['wall_tokens_per_second'] or 0:.0f} tokens/s")
    else:
        layout = (f"TP {args.tensor_parallel}{' SP' if args.sequence_parallel else ''} x DP {args.ranks // args.tensor_parallel}"
                  + (", distributed optimizer" if args.distributed_optimizer else "")
                  + (", overlapped" if args.overlap else ""))
        print(f"{what}, {args.ranks} ranks ({layout}): mgt ({args.precision}) "
              f"{mgt['tokens_per_second']:.0f} tokens/s, {mgt['tokens_per_second_per_gpu']:.0f} per GPU, "
              f"MFU {100 * mfu:.1f}%, peak {mgt['peak_mib']} MiB (fullest GPU, nvidia-smi), "
              f"loss {mgt['loss'][0]:.3f} -> {mgt['loss'][-1]:.3f}; {mgt['transport']}")
        if mgt["comm_ms"]:
            print(f"  data-parallel communication {mgt['comm_ms']:.2f} ms per iteration, "
                  f"{mgt['comm_exposed_ms']:.2f} ms of it waited for: {1 - mgt['comm_exposed_ms'] / mgt['comm_ms']:.0%} hidden")
        if mgt["tp_comm_ms"]:
            print(f"  tensor-parallel communication {mgt['tp_comm_ms']:.2f} ms per iteration, "
                  f"{mgt['tp_comm_exposed_ms'] or 0:.2f} ms of it on or waited for by the compute stream")
        for kind, parts in (("data-parallel", mgt["comm_by_operation"]), ("tensor-parallel", mgt["tp_comm_by_operation"])):
            for name, p in parts.items():
                print(f"    {kind} {name}: {p['count']:.0f} per iteration, {p['ms']:.2f} ms, {p['exposed_ms']:.2f} ms waited for")
    if all(v is not None for v in mgt["phases_ms"].values()):
        print("  step phases (ms per iteration): " + ", ".join(f"{k} {v:.1f}" for k, v in mgt["phases_ms"].items()))
    print(f"  {mgt['cmd']}")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"shape": args.shape, "micro_batch": args.micro_batch, "accumulate": args.accumulate,
                                "precision": args.precision,
                                "ranks": args.ranks, "tensor_parallel": args.tensor_parallel,
                                "sequence_parallel": args.sequence_parallel, "overlap": args.overlap,
                                "distributed_optimizer": args.distributed_optimizer, "mfu": mfu,
                                **{k: v for k, v in mgt.items() if k != "loss"}}) + "\n")
    if not args.no_peer:
        peer = run_peer(args.shape, args.micro_batch, args.iters, args.accumulate,
                        "fp16" if args.precision == "fp16" else "bf16")
        peer_mfu = peer["tokens_per_second"] * fpt / 1e12 / PEAK_TFLOPS
        print(f"{what}: peer (torch {peer['version']}, {'fp16' if args.precision == 'fp16' else 'bf16'} autocast, compile) "
              f"{peer['tokens_per_second']:.0f} tokens/s, MFU {100 * peer_mfu:.1f}%, peak {peer['peak_mib']:.0f} MiB; "
              f"mgt/peer = {mgt['tokens_per_second'] / peer['tokens_per_second']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
