#!/usr/bin/env python3
"""The data-parallel peer: PyTorch DDP of Hugging Face's GPT2LMHeadModel on N GPUs of this machine.

The model, precision and optimizer of bench_train_gpu.py's peer (SDPA attention, bf16 autocast,
fused AdamW, clip 1.0, torch.compile, no dropout), wrapped in DistributedDataParallel (NCCL,
gradients reduced in buckets during the backward, as DDP does by default), one process per GPU,
each at --micro-batch, --accumulate micro-batches per step (default 1): global batch
micro-batch x accumulate x N. Prints one JSON line: tokens/s of the job and
per GPU over the timed steps (after 3 warm-up steps), and the peak memory of GPU 0.

--fp8 torchao trains the transformer layers' four linears (QKV, attention projection, fc1, fc2)
in FP8 with torchao's float8 training (torchao.float8.convert_to_float8_training, the
"tensorwise" recipe: dynamic per-tensor scales, E4M3 forward and backward), compiled with the
rest; the embedding, the tied output layer, norms and attention stay in bf16 autocast, as in
Transformer Engine and mgt-train --fp8-format. transformers keeps GPT-2's projections in its
Conv1D (y = x W + b), which torchao does not convert, so each becomes the equal torch.nn.Linear
first. It needs a GPU of compute capability 8.9 or newer (FP8 tensor cores) and torchao (carried
as a wheel on the GPU machine: .whl/torchao-0.17.0, the release built for torch 2.11).
--check builds the tiny shape on the CPU, applies the same conversion, compares a forward pass
with the unconverted fp32 model and runs a backward (where the CPU has torch._scaled_mm), no GPU.

Usage: tools/bench/ddp_peer_gpu.py --gpus N [--shape gpt-1.3b] [--micro-batch 4] [--accumulate 1] [--iters 20]
       [--fp8 torchao] [--json FILE]
       tools/bench/ddp_peer_gpu.py --check [--fp8 torchao]
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


def conv1d_to_linear(model):
    """Replaces transformers' Conv1D modules (weight [in, out]) with the equal nn.Linear (weight [out, in])."""
    import torch
    from transformers.pytorch_utils import Conv1D
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Conv1D):
                fan_in, fan_out = child.weight.shape
                linear = torch.nn.Linear(fan_in, fan_out, bias=child.bias is not None,
                                         device=child.weight.device, dtype=child.weight.dtype)
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    if child.bias is not None:
                        linear.bias.copy_(child.bias)
                setattr(parent, name, linear)
    return model


def convert_to_fp8(model, recipe="tensorwise"):
    """The transformer layers' linears to torchao Float8Linear; the output layer (lm_head) stays bf16."""
    import torch
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    conv1d_to_linear(model)

    def in_fp8(module, fqn):
        # FP8 GEMMs need both dimensions divisible by 16.
        return (isinstance(module, torch.nn.Linear) and fqn.startswith("transformer.h.")
                and module.in_features % 16 == 0 and module.out_features % 16 == 0)

    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe), module_filter_fn=in_fp8)
    converted = sum(type(m).__name__ == "Float8Linear" for m in model.modules())
    if converted != 4 * model.config.n_layer:
        raise SystemExit(f"ddp_peer_gpu.py: {converted} linears converted to FP8, expected {4 * model.config.n_layer}")
    return model


def check(args):
    """On the CPU: the tiny shape, Conv1D -> Linear exact, the FP8 conversion's forward close to bf16's."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    layers, hidden, heads, seq = SHAPES["tiny"]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=seq, n_embd=hidden, n_layer=layers, n_head=heads,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).eval()
    tokens = torch.randint(0, 50257, (2, seq))
    with torch.no_grad():
        reference = model(input_ids=tokens).logits
        linear = conv1d_to_linear(model)
        same = linear(input_ids=tokens).logits
    print(f"Conv1D -> Linear: max |difference| {float((same - reference).abs().max()):.3g}", flush=True)
    if not torch.allclose(same, reference, atol=1e-5, rtol=1e-5):
        raise SystemExit("ddp_peer_gpu.py: the Linear model differs from the Conv1D one")
    if args.fp8 == "torchao":
        import torchao
        convert_to_fp8(model)
        print(f"torchao {torchao.__version__}: {sum(type(m).__name__ == 'Float8Linear' for m in model.modules())} "
              f"Float8Linear modules", flush=True)
        try:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                fp8 = model(input_ids=tokens).logits.float()
        except (RuntimeError, NotImplementedError) as e:
            print(f"FP8 forward not run on this CPU ({str(e).splitlines()[0][:120]})", flush=True)
            return 0
        error = float((fp8 - reference).norm() / reference.norm())
        print(f"FP8 forward on the CPU: relative error {error:.4f} against fp32", flush=True)
        if not error < 0.1:
            raise SystemExit("ddp_peer_gpu.py: the FP8 model's logits are far from the fp32 model's")
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        finite = all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
        print(f"FP8 backward on the CPU: loss {loss.item():.4f}, {len(grads)} gradients, all finite: {finite}", flush=True)
        if not finite:
            raise SystemExit("ddp_peer_gpu.py: the FP8 backward gave missing or non-finite gradients")
    return 0


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
    fp8 = None
    if args.fp8 == "torchao":
        import torchao
        if torch.cuda.get_device_capability() < (8, 9):
            raise SystemExit("ddp_peer_gpu.py: --fp8 needs a GPU of compute capability 8.9 or newer")
        convert_to_fp8(model)
        fp8 = f"torchao {torchao.__version__} float8 tensorwise"
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
                  "tokens_per_second_per_gpu": per_gpu, "peak_mib": torch.cuda.max_memory_allocated() / 2**20,
                  "fp8": fp8}
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
    ap.add_argument("--fp8", choices=["torchao"],
                    help="the transformer layers' linears in FP8 through torchao (tensorwise scaling)")
    ap.add_argument("--check", action="store_true", help="check the model conversion on the CPU and exit")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    for name in ("gpus", "micro_batch", "iters", "accumulate"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    if args.fp8 == "torchao":
        try:
            import torchao.float8  # noqa: F401
        except ImportError as e:
            sys.exit(f"ddp_peer_gpu.py: --fp8 torchao needs torchao ({e}); on the GPU machine: python3 -m pip install "
                     "--no-index --no-deps --target /tmp/site .whl/torchao-*.whl && export PYTHONPATH=/tmp/site")
    if args.check:
        return check(args)
    forwarded = ["--shape", args.shape, "--micro-batch", str(args.micro_batch), "--iters", str(args.iters),
                 "--accumulate", str(args.accumulate)]
    if args.fp8:
        forwarded += ["--fp8", args.fp8]
    if args.json:
        forwarded += ["--json", args.json]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.gpus}",
           os.path.abspath(__file__), "--worker", *forwarded]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
