#!/usr/bin/env python3
"""GPU decoding speed of mgt-generate beside transformers' generate() on the same GPU.

Run on the GPU machine from the repository root, with mgt's CUDA build (or the binaries that
tools/gpu/pack.sh packs) in DIR, and PyTorch with transformers importable by this Python:

    python3 tools/bench/bench_decode_gpu.py --bin DIR [--new 256] [--batch 1 32] [--repeats 3] [--peer-variants] [--wall] [--no-peer]

(tools/gpu/checks.sh decode runs it with --bin .devpack/bin.)

Config "gpt2-small": GPT-2's 124M shape with random weights from transformers' initialisation
(seed 0), saved as safetensors and imported into mgt with mgt-ckpt-convert, so both sides run the
same weights. Prompts of 32 tokens, greedy decoding, a fixed number of new tokens (256 by
default), batch 1 and batch 32 (32 copies of the prompt, one micro-batch).

mgt: mgt-generate --device cuda, with --bf16 and in fp32, on two micro-batches of the same
prompts; the rate its timing line gives for the last micro-batch is reported (the first pays the
process's start-up: kernel modules loaded, GEMM plans chosen).

The peer, configured as transformers' users run it: the saved directory loaded with
AutoModelForCausalLM.from_pretrained in torch.bfloat16 (its default attention implementation),
moved to the GPU, model.generate(input_ids, attention_mask=..., max_new_tokens=N,
min_new_tokens=N, do_sample=False, use_cache=True, pad_token_id=EOS) with its default dynamic
key/value cache, no torch.compile. One whole generation of the same batch and length warms it up;
then --repeats generations are timed, each between torch.cuda.synchronize() calls, and the median
is reported. Reported: generated tokens per second over the whole batch (the prompt's pass
included), the peer's milliseconds per step, and mgt's bf16 rate over the peer's.

--wall also confirms mgt's bf16 rate by the wall clock: whole runs of 2 and 18 micro-batches of the
same prompts and length, the difference of their generated tokens over the difference of their
seconds (start-up, loading and the first micro-batch's one-time work cancel). --no-peer times mgt
alone (the greedy check against transformers' fp32 tokens still runs).

--peer-variants also times the peer, one generation each in a fresh process, as this script
timed it until 2026-11-28 (an fp32 generation first, then .to(bfloat16), no attention mask, a
4-token warm-up) and with one thing changed at a time (a 4-token warm-up only; no attention
mask; use_cache=False), to show what each costs. The peer's cuBLAS and CUDA runtime are named
too: LD_LIBRARY_PATH (tools/gpu/checks.sh sets one for mgt's packed libraries) can make torch
load other copies than its own.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT_IDS = [464, 3290, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 383, 2068, 318, 257, 1332, 11] * 2
EOS = 50256  # GPT-2's end of text; also the pad token, as GPT-2 has none of its own


def make_hf_model(directory):
    """GPT-2 124M with transformers' random initialisation (seed 0), saved as safetensors."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                        activation_function="gelu_new")
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(directory, safe_serialization=True)
    return model


def load_peer(hf_dir, dtype):
    """The saved model as users load it: from_pretrained in the wanted dtype, then to the GPU."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    # transformers 5 names the argument dtype; earlier versions torch_dtype.
    name = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    model = AutoModelForCausalLM.from_pretrained(hf_dir, **{name: dtype}).to("cuda").eval()
    if next(model.parameters()).dtype != dtype:
        raise SystemExit(f"from_pretrained({name}={dtype}) gave {next(model.parameters()).dtype}")
    model.generation_config.pad_token_id = EOS
    return model


def write_prompts(work, batch, micro_batches):
    prompts = os.path.join(work, f"prompts-{batch}-{micro_batches}.jsonl")
    with open(prompts, "w") as f:
        for _ in range(micro_batches * batch):
            f.write(json.dumps({"prompt": " ".join(str(i) for i in PROMPT_IDS)}) + "\n")
    return prompts


def mgt_command(bindir, ckpt, prompts, batch, new_tokens, bf16):
    return [os.path.join(bindir, "mgt-generate"), "--device", "cuda", "--load", ckpt, "--prompts", prompts,
            "--micro-batch-size", str(batch), "--max-new-tokens", str(new_tokens),
            "--tokenizer-type", "NullTokenizer", "--vocab-size", "50256"] + (["--bf16"] if bf16 else [])


def mgt_rate(bindir, ckpt, batch, new_tokens, work, bf16):
    cmd = mgt_command(bindir, ckpt, write_prompts(work, batch, 2), batch, new_tokens, bf16)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"mgt-generate failed: {run.stderr[-2000:]}")
    rate = float(re.search(r"the last micro-batch ([0-9.]+) tokens/s", run.stderr).group(1))
    first = json.loads(run.stdout.splitlines()[0])["tokens"]
    return rate, first, " ".join(cmd)


def mgt_wall_rate(bindir, ckpt, batch, new_tokens, work, few=2, many=18):
    """mgt-generate --bf16 by the wall clock: whole runs of `few` and `many` micro-batches of the
    same prompts and length, the difference of their generated tokens (counted in their output,
    in case a completion ends early) over the difference of their seconds, so that start-up,
    loading and the first micro-batch's one-time work cancel. Returns (tokens/s, seconds of each run)."""
    seconds, generated = [], []
    for micro_batches in (few, many):
        cmd = mgt_command(bindir, ckpt, write_prompts(work, batch, micro_batches), batch, new_tokens, True)
        start = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, check=True)
        seconds.append(time.perf_counter() - start)
        generated.append(sum(len(json.loads(line)["tokens"]) for line in run.stdout.splitlines() if line.strip()))
    return (generated[1] - generated[0]) / (seconds[1] - seconds[0]), seconds


def generate(model, batch, new_tokens, mask=True, use_cache=True):
    """One greedy generation of exactly new_tokens tokens per row; returns (seconds, tokens of row 0)."""
    import torch
    ids = torch.tensor([PROMPT_IDS] * batch, device="cuda")
    kwargs = {"attention_mask": torch.ones_like(ids)} if mask else {}
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                         use_cache=use_cache, pad_token_id=EOS, **kwargs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if out.shape[1] != len(PROMPT_IDS) + new_tokens:
        raise SystemExit(f"generate() returned {out.shape[1] - len(PROMPT_IDS)} new tokens, not {new_tokens}")
    return seconds, out[0, len(PROMPT_IDS):].tolist()


def peer_rate(model, batch, new_tokens, repeats):
    """Warmed up by one whole generation of the same shape; the median of `repeats` timed ones."""
    generate(model, batch, new_tokens)
    times = [generate(model, batch, new_tokens)[0] for _ in range(repeats)]
    return batch * new_tokens / statistics.median(times), times


# --peer-variants: the peer with one thing changed at a time, each in a fresh process so that
# none inherits what an earlier generation loaded or tuned.
VARIANTS = {
    "before": "as timed until 2026-11-28: an fp32 run first, then .to(bfloat16), no mask, 4-token warm-up",
    "short-warm-up": "as users run it, but warmed up by a 4-token generation only",
    "no-mask": "as users run it, without the attention mask",
    "no-cache": "as users run it, with use_cache=False",
}


def run_variant(name, hf_dir, batch, new_tokens):
    """One timed generation of the named variant, in this (fresh) process; prints its JSON result."""
    import torch
    if name == "before":
        from transformers import GPT2LMHeadModel
        model = GPT2LMHeadModel.from_pretrained(hf_dir).to("cuda").eval()
        generate(model, 1, 64, mask=False)  # the greedy reference ran first, in fp32
        model.to(torch.bfloat16)
        generate(model, batch, 4, mask=False)
        seconds = generate(model, batch, new_tokens, mask=False)[0]
    else:
        model = load_peer(hf_dir, torch.bfloat16)
        kwargs = {"no-mask": {"mask": False}, "no-cache": {"use_cache": False}}.get(name, {})
        generate(model, batch, 4 if name == "short-warm-up" else new_tokens, **kwargs)
        seconds = generate(model, batch, new_tokens, **kwargs)[0]
    print(json.dumps({"variant": name, "batch": batch, "seconds": seconds,
                      "tokens_per_second": batch * new_tokens / seconds}))


def peer_variants(hf_dir, batch, new_tokens):
    """(label, tokens/s, seconds) of each variant, each timed in a child process."""
    rows = []
    for name, label in VARIANTS.items():
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--variant", name, "--hf-dir", hf_dir,
                              "--batch", str(batch), "--new", str(new_tokens)], capture_output=True, text=True)
        if run.returncode != 0:
            rows.append((label, None, f"failed: {run.stderr.strip().splitlines()[-1:]}"))
            continue
        result = json.loads(run.stdout.strip().splitlines()[-1])
        rows.append((label, result["tokens_per_second"], result["seconds"]))
    return rows


def cuda_libraries():
    """Where this process loaded cuBLAS and the CUDA runtime from (torch's own, or LD_LIBRARY_PATH's)."""
    found = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if re.search(r"/lib(cublas|cublasLt|cudart)\.so", path):
                    found.add(path)
    except OSError:
        return "unknown"
    return ", ".join(sorted(found)) or "none found"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="directory holding mgt-generate and mgt-ckpt-convert (required)")
    ap.add_argument("--new", type=int, default=256, help="new tokens per row (default 256)")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32], help="batch sizes (default 1 32)")
    ap.add_argument("--repeats", type=int, default=3, help="timed peer generations per batch (default 3)")
    ap.add_argument("--peer-variants", action="store_true",
                    help="also time the peer with one setting changed at a time, each in a fresh process")
    ap.add_argument("--wall", action="store_true",
                    help="also mgt's bf16 rate by the wall clock of two whole runs (2 and 18 micro-batches)")
    ap.add_argument("--no-peer", action="store_true", help="time mgt only")
    ap.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    ap.add_argument("--hf-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.new < 1 or args.repeats < 1 or min(args.batch) < 1:
        ap.error("--new, --repeats and --batch must be positive")
    if args.variant:
        return run_variant(args.variant, args.hf_dir, args.batch[0], args.new)
    if not args.bin:
        ap.error("--bin is required")
    import torch
    import transformers
    with tempfile.TemporaryDirectory() as work:
        hf_dir = os.path.join(work, "hf")
        ckpt = os.path.join(work, "ckpt")
        make_hf_model(hf_dir)
        subprocess.run([os.path.join(args.bin, "mgt-ckpt-convert"), "--model-type", "GPT", "--loader", "hf",
                        "--saver", "mgt", "--load-dir", hf_dir, "--save-dir", ckpt],
                       check=True, capture_output=True, text=True)
        # The greedy reference: transformers in fp32, batch 1, 64 tokens.
        fp32_peer = load_peer(hf_dir, torch.float32)
        _, reference = generate(fp32_peer, 1, 64)
        del fp32_peer
        torch.cuda.empty_cache()
        peer = None if args.no_peer else load_peer(hf_dir, torch.bfloat16)
        setup = "not run" if peer is None else (
            f"transformers {transformers.__version__}, torch {torch.__version__}, bf16, "
            f"attention {getattr(peer.config, '_attn_implementation', 'default')}, dynamic KV cache, generate()")
        rows, variants = [], []
        for batch in args.batch:
            rate, _, cmd = mgt_rate(args.bin, ckpt, batch, args.new, work, True)
            rate32, tokens, _ = mgt_rate(args.bin, ckpt, batch, args.new, work, False)
            prate, times = peer_rate(peer, batch, args.new, args.repeats) if peer else (float("nan"), [])
            rows.append((batch, rate, rate32, prate, times))
            # The line tools/gpu/checks.sh picks up (label before the first colon).
            print(f"decode batch {batch}, {len(PROMPT_IDS)}-token prompt, {args.new} new: mgt {rate:.0f} tokens/s "
                  f"(bf16; fp32 {rate32:.0f}), peer ({setup}) {prate:.0f} tokens/s; mgt/peer = {rate / prate:.2f}",
                  flush=True)
            if args.wall:
                wall, seconds = mgt_wall_rate(args.bin, ckpt, batch, args.new, work)
                print(f"decode batch {batch}, wall clock: mgt {wall:.0f} tokens/s (bf16; whole runs of 2 and 18 "
                      f"micro-batches: {seconds[0]:.2f} s and {seconds[1]:.2f} s)", flush=True)
            if args.peer_variants:
                variants += [(batch, label, r, t) for label, r, t in peer_variants(hf_dir, batch, args.new)]
        agree = tokens[:64] == reference[:64]
        print(f"greedy tokens of mgt's fp32 equal to transformers' fp32 for the first 64: {agree}")
        print(f"  {cmd}")
        print()
        print(f"GPU: {torch.cuda.get_device_name()}; peer: {setup}")
        print(f"peer's cuBLAS and CUDA runtime: {cuda_libraries()}")
        print(f"GPT-2 124M shape, random weights, {len(PROMPT_IDS)}-token prompt, {args.new} new tokens, greedy; "
              f"peer: median of {args.repeats} after a whole warm-up generation")
        print(f"{'batch':>5}  {'mgt bf16 tok/s':>14}  {'mgt fp32 tok/s':>14}  {'peer tok/s':>10}  "
              f"{'peer ms/step':>12}  {'peer runs, s':>20}  {'mgt/peer':>8}")
        for batch, rate, rate32, prate, times in rows:
            runs = " ".join(f"{t:.2f}" for t in times)
            print(f"{batch:>5}  {rate:>14.0f}  {rate32:>14.0f}  {prate:>10.0f}  {1000 * batch / prate:>12.2f}  "
                  f"{runs:>20}  {rate / prate:>8.2f}")
        if variants:
            print("peer variants (one timed generation each, in a fresh process):")
            for batch, label, r, t in variants:
                rate = f"{r:>9.0f} tokens/s ({t:.2f} s)" if r is not None else f"{'':>9} {t}"
                print(f"  batch {batch:>3}  {rate}  {label}")


if __name__ == "__main__":
    main()
