#!/usr/bin/env python3
"""Zero-shot evaluation speed of mgt-eval, beside the same protocol over transformers.

Config "gpt2-small": GPT-2's 124M shape (12 layers, hidden 768, 12 heads, 1024 positions,
vocabulary 50257, tanh GeLU), random weights from transformers' initialisation (seed 0), saved as
safetensors and imported into mgt with mgt-ckpt-convert, so both sides evaluate the same weights.
Tasks: LAMBADA (the first --limit examples of datasets/lambada_test.jsonl) and WikiText-103 (the
first --wiki-lines lines of the test set, --overlapping-eval 32), sequence length 1024, micro-batch 8,
fp32 on the CPU with the same thread count. The peer is tools/reference/zeroshot_reference.py:
Megatron's method written over transformers' GPT2LMHeadModel, padding every sample to
seq_length + 1 as Megatron does. Reported: wall seconds of each (model loading included) and
whether the results agree (counts exactly, metrics to 1e-4 relative).

Usage: tools/bench/bench_eval.py [--build build] [--threads 2] [--limit 200] [--wiki-lines 100]
Needs `pip install torch transformers safetensors tokenizers regex numpy`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")
GPT2 = ["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", os.path.join(DATA, "gpt2-vocab.json"),
        "--merge-file", os.path.join(DATA, "gpt2-merges.txt")]


def timed(cmd, env):
    start = time.perf_counter()
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{run.stderr[-2000:]}")
    return time.perf_counter() - start, run.stdout


def agree(a, b, keys):
    return all(abs(a[k] - b[k]) <= 1e-4 * abs(b[k]) for k in keys) and a["counts"] == {
        k: b["counts"][k] for k in a["counts"] if k in b["counts"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--wiki-lines", type=int, default=100)
    args = ap.parse_args()
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as work:
        torch.manual_seed(0)
        config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                            activation_function="gelu_new")
        GPT2LMHeadModel(config).save_pretrained(os.path.join(work, "hf"), safe_serialization=True)
        subprocess.run([os.path.join(args.build, "bin", "mgt-ckpt-convert"), "--model-type", "GPT", "--loader",
                        "hf", "--saver", "mgt", "--load-dir", os.path.join(work, "hf"), "--save-dir",
                        os.path.join(work, "ckpt")] + GPT2[2:], check=True, capture_output=True)
        lambada = os.path.join(work, "lambada.jsonl")
        with open(lambada, "w") as f:
            f.writelines(open(os.path.join(DATA, "lambada_test.jsonl")).readlines()[:args.limit])
        wiki = os.path.join(work, "wikitext-103.wiki.test.head.tokens")
        with open(wiki, "w") as f:
            f.writelines(open(os.path.join(DATA, "wikitext-103.wiki.test.tokens")).readlines()[:args.wiki_lines])
        rows = []
        for task, data, keys in (("LAMBADA", lambada, ["accuracy", "target_ppl"]),
                                 ("WIKITEXT103", wiki, ["avg_loss", "ppl", "adjusted_ppl"])):
            mgt_cmd = [os.path.join(args.build, "bin", "mgt-eval"), "--task", task, "--valid-data", data, "--load",
                       os.path.join(work, "ckpt"), "--micro-batch-size", "8"]
            ref_cmd = [sys.executable, os.path.join(ROOT, "tools", "reference", "zeroshot_reference.py"), "--hf-dir",
                       os.path.join(work, "hf"), "--task", task, "--valid-data", data, "--seq-length", "1024",
                       "--micro-batch-size", "8"] + GPT2
            t_mgt, out_mgt = timed(mgt_cmd, env)
            t_ref, out_ref = timed(ref_cmd, env)
            a, b = json.loads(out_mgt), json.loads(out_ref)
            rows.append((task, t_mgt, t_ref, agree(a, b, keys), {k: a[k] for k in keys}, " ".join(mgt_cmd)))
    print(f"threads {args.threads}, LAMBADA first {args.limit} examples, WikiText-103 test first {args.wiki_lines} lines")
    print(f"{'task':<12} {'mgt-eval s':>10} {'reference s':>12} {'speed-up':>9} {'agree':>6}  metrics")
    for task, t_mgt, t_ref, ok, metrics, _ in rows:
        print(f"{task:<12} {t_mgt:>10.1f} {t_ref:>12.1f} {t_ref / t_mgt:>8.1f}x {str(ok):>6}  {metrics}")
    for row in rows:
        print("mgt command:", row[5])


if __name__ == "__main__":
    main()
