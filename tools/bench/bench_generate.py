#!/usr/bin/env python3
"""Generation speed of mgt-generate with its key/value cache, beside Hugging Face transformers.

Config "gpt2-small": GPT-2's 124M shape (12 layers, hidden 768, 12 heads, 1024 positions,
vocabulary 50257, tanh GeLU, tied embeddings), random weights from transformers' initialisation
(seed 0), saved as safetensors and imported into mgt with mgt-ckpt-convert, so both sides run the
same weights. One prompt of 16 tokens, greedy decoding, fp32 on the CPU with the same thread
count. For each number of new tokens N the script reports milliseconds per generated token (the
generation time, prompt pass included and model loading excluded, divided by N: mgt-generate's
own timing line, the generate() call for transformers) and whether both produced the same
tokens. A cache keeps the cost per token nearly flat in N; without one it grows with N (shown
for transformers with use_cache=False at the smallest N).

Usage: tools/bench/bench_generate.py [--build build] [--threads 2] [--new 64 256 768]
Needs `pip install torch transformers safetensors`.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT_IDS = [464, 3290, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 383, 2068, 318, 257, 1332, 11]


def make_hf_model(directory):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                        activation_function="gelu_new")
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(directory, safe_serialization=True)
    return model


def mgt_generate(build, ckpt, new_tokens, threads, work):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    prompts = os.path.join(work, "prompt.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"prompt": " ".join(str(i) for i in PROMPT_IDS)}) + "\n")
    cmd = [os.path.join(build, "bin", "mgt-generate"), "--load", ckpt, "--prompts", prompts,
           "--max-new-tokens", str(new_tokens), "--tokenizer-type", "NullTokenizer", "--vocab-size", "50256"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    seconds = float(re.search(r"tokens for \d+ prompts in ([0-9.]+) s", run.stderr).group(1))
    return seconds, json.loads(run.stdout)["tokens"], " ".join(cmd)


def hf_generate(model, new_tokens, use_cache):
    import torch
    ids = torch.tensor([PROMPT_IDS])
    with torch.no_grad():
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             use_cache=use_cache, pad_token_id=50256)
        elapsed = time.perf_counter() - start
    return elapsed, out[0, len(PROMPT_IDS):].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--new", type=int, nargs="+", default=[64, 256, 768])
    args = parser.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as work:
        hf_dir = os.path.join(work, "hf")
        ckpt = os.path.join(work, "ckpt")
        model = make_hf_model(hf_dir)
        subprocess.run([os.path.join(args.build, "bin", "mgt-ckpt-convert"), "--model-type", "GPT", "--loader", "hf",
                        "--saver", "mgt", "--load-dir", hf_dir, "--save-dir", ckpt],
                       check=True, capture_output=True, text=True)
        # Warm-up: one whole generation of the first length, as the GPU decoding benchmark does
        # (the first full-length generate() in a process pays one-time work).
        hf_generate(model, min(args.new), True)
        rows = []
        for n in args.new:
            t_mgt, tok_mgt, cmd = mgt_generate(args.build, ckpt, n, args.threads, work)
            t_hf, tok_hf = hf_generate(model, n, True)
            row = {"new_tokens": n,
                   "mgt_ms_per_token": 1000 * t_mgt / n,
                   "hf_ms_per_token": 1000 * t_hf / n,
                   "same_tokens": tok_mgt == tok_hf[:len(tok_mgt)] and len(tok_mgt) == n}
            if n == min(args.new):
                t_nc, _ = hf_generate(model, n, False)
                row["hf_no_cache_ms_per_token"] = 1000 * t_nc / n
            rows.append(row)
        print(f"threads {args.threads}; mgt command: {cmd}")
        print(f"{'new tokens':>10} {'mgt ms/tok':>11} {'HF ms/tok':>10} {'HF no-cache':>12} {'same tokens':>12}")
        for r in rows:
            nc = f"{r['hf_no_cache_ms_per_token']:.1f}" if "hf_no_cache_ms_per_token" in r else "-"
            print(f"{r['new_tokens']:>10} {r['mgt_ms_per_token']:>11.1f} {r['hf_ms_per_token']:>10.1f} {nc:>12} "
                  f"{str(r['same_tokens']):>12}")
        json.dump(rows, sys.stderr)
        sys.stderr.write("\n")


if __name__ == "__main__":
    main()
