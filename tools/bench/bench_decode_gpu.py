#!/usr/bin/env python3
"""GPU decoding speed of mgt-generate beside transformers' generate() on the same GPU.

Config "gpt2-small": GPT-2's 124M shape with random weights from transformers' initialisation
(seed 0), saved as safetensors and imported into mgt with mgt-ckpt-convert, so both sides run the
same weights. Prompts of 32 tokens, greedy decoding, a fixed number of new tokens (256 by
default), batch 1 and batch 32 (32 copies of the prompt, one micro-batch). mgt-generate runs with
--device cuda, with --bf16 and in fp32, on two micro-batches of the same prompts; its timing line's
rate of the last micro-batch is reported (the first pays the process's start-up: kernel modules
loaded, GEMM plans chosen). The peer runs GPT2LMHeadModel.generate with its key/value cache in
bf16 (the configuration users run), timed around the call after a warm-up. Reported: generated tokens per
second over the whole batch; the ratio is mgt's bf16 figure over the peer's.

Usage: tools/bench/bench_decode_gpu.py --bin DIR [--new 256] [--batch 1 32]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

PROMPT_IDS = [464, 3290, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 383, 2068, 318, 257, 1332, 11] * 2


def make_hf_model(directory):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                        activation_function="gelu_new")
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(directory, safe_serialization=True)
    return model


def mgt_rate(bindir, ckpt, batch, new_tokens, work, bf16):
    prompts = os.path.join(work, f"prompts-{batch}.jsonl")
    with open(prompts, "w") as f:
        for _ in range(2 * batch):
            f.write(json.dumps({"prompt": " ".join(str(i) for i in PROMPT_IDS)}) + "\n")
    cmd = [os.path.join(bindir, "mgt-generate"), "--device", "cuda", "--load", ckpt, "--prompts", prompts,
           "--micro-batch-size", str(batch), "--max-new-tokens", str(new_tokens),
           "--tokenizer-type", "NullTokenizer", "--vocab-size", "50256"] + (["--bf16"] if bf16 else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"mgt-generate failed: {run.stderr[-2000:]}")
    rate = float(re.search(r"the last micro-batch ([0-9.]+) tokens/s", run.stderr).group(1))
    first = json.loads(run.stdout.splitlines()[0])["tokens"]
    return rate, first, " ".join(cmd)


def peer_rate(model, batch, new_tokens):
    import torch
    ids = torch.tensor([PROMPT_IDS] * batch, device="cuda")
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=50256)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             use_cache=True, pad_token_id=50256)
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    return batch * new_tokens / elapsed, out[0, len(PROMPT_IDS):].tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    args = ap.parse_args()
    import torch
    with tempfile.TemporaryDirectory() as work:
        hf_dir = os.path.join(work, "hf")
        ckpt = os.path.join(work, "ckpt")
        model = make_hf_model(hf_dir)
        subprocess.run([os.path.join(args.bin, "mgt-ckpt-convert"), "--model-type", "GPT", "--loader", "hf",
                        "--saver", "mgt", "--load-dir", hf_dir, "--save-dir", ckpt],
                       check=True, capture_output=True, text=True)
        fp32_peer = model.to("cuda")
        _, reference = peer_rate(fp32_peer, 1, 64)
        peer = model.to(torch.bfloat16)
        for batch in args.batch:
            rate, _, cmd = mgt_rate(args.bin, ckpt, batch, args.new, work, True)
            rate32, tokens, _ = mgt_rate(args.bin, ckpt, batch, args.new, work, False)
            prate, _ = peer_rate(peer, batch, args.new)
            print(f"decode batch {batch}, {len(PROMPT_IDS)}-token prompt, {args.new} new: mgt {rate:.0f} tokens/s "
                  f"(bf16; fp32 {rate32:.0f}), peer (transformers {__import__('transformers').__version__}, bf16, "
                  f"KV cache) {prate:.0f} tokens/s; mgt/peer = {rate / prate:.2f}")
        print(f"greedy tokens of mgt's fp32 equal to transformers' fp32 for the first 64: {tokens[:64] == reference[:64]}")
        print(f"  {cmd}")


if __name__ == "__main__":
    main()
