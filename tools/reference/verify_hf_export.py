#!/usr/bin/env python3
"""Checks an mgt-ckpt-convert export against Hugging Face transformers.

Loads the export with transformers.AutoModelForCausalLM.from_pretrained (GPT2LMHeadModel,
LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3ForCausalLM or
Qwen3MoeForCausalLM as config.json says; torch, fp32),
computes the
logits of a sequence of token ids, and compares them with mgt's logits for the same ids computed
from the mgt checkpoint the export came from. mgt's side runs through the hidden Catch2 test
"[.hf-logits-reference]" of mgt-tests (CPU backend, fp32), which reads the ids from a file and
writes the logits to another; no program of mgt's needs a logits option for this.

To tell conversion errors from fp32 rounding, the same transformers model is also run in float64:
the distance of each fp32 computation (mgt's, transformers') from that float64 result shows the
rounding noise floor. A layout error (a wrong QKV permutation, a missing transposition) shows up
as differences of the order of the logits themselves.

  mgt-ckpt-convert --model-type GPT --loader mgt --saver hf --load-dir CKPT --save-dir EXPORT
  python3 tools/reference/verify_hf_export.py --mgt-tests build/tests/mgt-tests \
      --checkpoint CKPT --export EXPORT [--tokens 64] [--seed 1]

Needs torch and transformers (any recent version). Exit status 1 when the largest difference
between mgt and transformers exceeds --tolerance times the largest |logit|.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def mgt_logits(mgt_tests, checkpoint, tokens):
    with tempfile.TemporaryDirectory() as tmp:
        ids, out = os.path.join(tmp, "tokens.bin"), os.path.join(tmp, "logits.bin")
        np.asarray(tokens, dtype="<i8").tofile(ids)
        env = dict(os.environ, MGT_HF_LOGITS_CHECKPOINT=checkpoint, MGT_HF_LOGITS_TOKENS=ids,
                   MGT_HF_LOGITS_OUTPUT=out)
        subprocess.run([mgt_tests, "[.hf-logits-reference]"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        return np.fromfile(out, dtype="<f4").reshape(len(tokens), -1)


def hf_logits(export, tokens, float64):
    import torch
    import transformers

    with open(os.path.join(export, "config.json")) as f:
        config = json.load(f)
        moe = "num_local_experts" in config or "num_experts" in config
    # transformers 5 runs experts through a grouped GEMM that takes no float64; its plain loop does.
    options = {"experts_implementation": "eager"} if moe and int(transformers.__version__.split(".")[0]) >= 5 else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(export, **options)
    model = model.to(torch.float64 if float64 else torch.float32).eval()
    with torch.no_grad():
        out = model(torch.tensor([tokens], dtype=torch.long)).logits[0]
    return out.to(torch.float64).numpy()


def compare(name, a, b):
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    scale = np.maximum(np.abs(b), 1e-30)
    result = {
        "max_abs_diff": float(diff.max()),
        "max_rel_diff": float((diff / scale)[np.abs(b) > 1e-3].max()),
        "max_abs_logit": float(np.abs(b).max()),
        "same_argmax": bool((a.argmax(-1) == b.argmax(-1)).all()),
    }
    print(f"{name}: " + json.dumps(result), file=sys.stderr)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mgt-tests", required=True, help="the mgt-tests binary")
    p.add_argument("--checkpoint", required=True, help="the mgt checkpoint that was exported")
    p.add_argument("--export", required=True, help="the directory mgt-ckpt-convert wrote")
    p.add_argument("--tokens", type=int, default=64, help="sequence length (capped at n_positions)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest accepted |mgt - transformers| / max |logit|")
    args = p.parse_args()

    with open(os.path.join(args.export, "config.json")) as f:
        config = json.load(f)
    n = min(args.tokens, config.get("n_positions") or config["max_position_embeddings"])
    vocab = min(config["vocab_size"], 50257) if config.get("model_type") == "gpt2" else config["vocab_size"]
    tokens = np.random.default_rng(args.seed).integers(0, vocab, size=n).tolist()

    mgt = mgt_logits(args.mgt_tests, os.path.abspath(args.checkpoint), tokens)
    hf32 = hf_logits(args.export, tokens, float64=False)
    hf64 = hf_logits(args.export, tokens, float64=True)
    if mgt.shape != hf32.shape:
        print(f"shape mismatch: mgt {mgt.shape}, transformers {hf32.shape}", file=sys.stderr)
        return 1
    summary = {
        "tokens": n,
        "vocab": int(hf32.shape[1]),
        "mgt_vs_transformers_fp32": compare("mgt fp32 vs transformers fp32", mgt, hf32),
        "mgt_vs_transformers_fp64": compare("mgt fp32 vs transformers fp64", mgt, hf64),
        "transformers_fp32_vs_fp64": compare("transformers fp32 vs fp64", hf32, hf64),
    }
    print(json.dumps(summary, indent=2))
    worst = summary["mgt_vs_transformers_fp32"]
    return 0 if worst["max_abs_diff"] <= args.tolerance * worst["max_abs_logit"] else 1


if __name__ == "__main__":
    sys.exit(main())
