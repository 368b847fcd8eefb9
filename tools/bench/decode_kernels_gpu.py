#!/usr/bin/env python3
"""GPU kernel time per decode step of mgt-generate, by kernel, from Nsight Compute.

The model and prompts of bench_decode_gpu.py (GPT-2 124M shape, a 32-token prompt, greedy,
--bf16). mgt-generate runs twice under `ncu` (caches not flushed and clocks not locked, so that
kernels see what they see in a real run), once for 20 and once for 40 new tokens; the difference,
divided by 20, is the kernel time of one decode step with the prompt and start-up costs taken out.

Usage: tools/bench/decode_kernels_gpu.py --bin DIR [--batch 1 32]
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode_gpu  # noqa: E402  (the model and prompts of the decoding benchmark)

STEPS = 20


def kernel_times(bindir, ckpt, prompts, batch, new_tokens, work):
    out = os.path.join(work, f"kernels-{batch}-{new_tokens}.csv")
    cmd = ["ncu", "--cache-control", "none", "--clock-control", "none", "--csv", "--metrics",
           "gpu__time_duration.sum", "--print-units", "base", os.path.join(bindir, "mgt-generate"), "--bf16",
           "--device", "cuda", "--load", ckpt, "--prompts", prompts, "--micro-batch-size", str(batch),
           "--max-new-tokens", str(new_tokens), "--tokenizer-type", "NullTokenizer", "--vocab-size", "50256"]
    with open(out, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True)
    rows = list(csv.reader(line for line in open(out) if line.startswith('"')))
    head, body = rows[0], rows[1:]
    name, value = head.index("Kernel Name"), head.index("Metric Value")
    by = {}
    for r in body:
        key = r[name].split("(")[0][:70]
        t, n = by.get(key, (0.0, 0))
        by[key] = (t + float(r[value].replace(",", "")) / 1e3, n + 1)  # ns -> us
    return by, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        hf_dir, ckpt = os.path.join(work, "hf"), os.path.join(work, "ckpt")
        bench_decode_gpu.make_hf_model(hf_dir)
        subprocess.run([os.path.join(args.bin, "mgt-ckpt-convert"), "--model-type", "GPT", "--loader", "hf",
                        "--saver", "mgt", "--load-dir", hf_dir, "--save-dir", ckpt],
                       check=True, capture_output=True, text=True)
        for batch in args.batch:
            prompts = os.path.join(work, f"prompts-{batch}.jsonl")
            with open(prompts, "w") as f:
                for _ in range(batch):
                    f.write('{"prompt": "%s"}\n' % " ".join(str(i) for i in bench_decode_gpu.PROMPT_IDS))
            short, _ = kernel_times(args.bin, ckpt, prompts, batch, STEPS, work)
            long, cmd = kernel_times(args.bin, ckpt, prompts, batch, 2 * STEPS, work)
            step = {k: ((t - short.get(k, (0.0, 0))[0]) / STEPS, (n - short.get(k, (0.0, 0))[1]) / STEPS)
                    for k, (t, n) in long.items()}
            total = sum(t for t, _ in step.values())
            kernels = sum(n for _, n in step.values())
            print(f"decode kernels, batch {batch}, bf16: {total:.1f} us of kernels per step, {kernels:.0f} kernels")
            for k, (t, n) in sorted(step.items(), key=lambda kv: -kv[1][0])[:10]:
                if n > 0:
                    print(f"  {k:70s} {t:8.1f} us {n:5.1f} per step")
            print(f"  {cmd}")


if __name__ == "__main__":
    main()
