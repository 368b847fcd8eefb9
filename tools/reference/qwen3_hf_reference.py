#!/usr/bin/env python3
"""Writes the golden files of mgt's Qwen3 and Qwen3-MoE import tests with Hugging Face transformers.

Builds a small random Qwen3ForCausalLM and Qwen3MoeForCausalLM in fp32 with transformers itself,
saves each with save_pretrained and records its logits for one fixed sequence of token ids, and the
tokens its greedy decoding adds to a prompt:

  tests/ckpt/golden/hf-qwen3-tiny/     Qwen3ForCausalLM: 2 layers, hidden size 32, four query heads
                                       sharing two key/value heads of head_dim 16 (not hidden size /
                                       heads), each query and key head RMS-normalised (q_norm,
                                       k_norm) before RoPE, intermediate size 40, tied embeddings,
                                       vocabulary 128
  tests/ckpt/golden/hf-qwen3-moe-tiny/ Qwen3MoeForCausalLM: 3 layers (the middle one dense through
                                       mlp_only_layers, of intermediate size 40), the same attention,
                                       4 experts of moe_intermediate_size 16, top-2 renormalised
                                       (norm_topk_prob true), untied
  tests/ckpt/golden/hf_qwen3_logits.json, hf_qwen3_moe_logits.json
                                       {"tokens": [...], "shape": [T, V], "logits": [...],
                                        "prompt": [...], "greedy": [...]} with transformers'
                                       fp32 logits and greedy continuation

tests/ckpt/test_hf_qwen3.cpp imports each directory with mgt-ckpt-convert's loader, runs mgt's
forward on the CPU backend (fp32) and compares its logits with these, and decodes the prompt
greedily with mgt's key/value cache.

The weights are drawn with a larger spread than the default initialisation, and the norms' weights
away from 1, so that a wrong row order anywhere changes the logits visibly. fp32 rounding must not
be able to change a routing choice or a greedy step, so the script checks (in float64) that every
token's k-th and (k+1)-th expert probabilities, and every greedy step's two best logits, lie well
apart.

  python3 tools/reference/qwen3_hf_reference.py [--out tests/ckpt/golden]

Needs torch and transformers (written with torch 2.15 and transformers 5.24).
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch
import transformers

VOCAB = 128
TOKENS = 16
PROMPT = 6
NEW_TOKENS = 8
SEED = 1357
MARGIN = 1e-4


def randomize(model, seed):
    """Weights of a wider spread than the default init; norm weights around 1."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            if name.endswith("norm.weight"):
                param.copy_(1.0 + 0.1 * noise)
            else:
                param.copy_(0.15 * noise)


def build(kind):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, use_sliding_window=False,
                  bos_token_id=1, eos_token_id=2)
    if kind == "qwen3":
        config = transformers.Qwen3Config(num_hidden_layers=2, tie_word_embeddings=True, **common)
        return transformers.Qwen3ForCausalLM(config)
    config = transformers.Qwen3MoeConfig(
        num_hidden_layers=3, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=16, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
        router_aux_loss_coef=0.02, **common)
    config._experts_implementation = "eager"
    return transformers.Qwen3MoeForCausalLM(config)


def routing_margin(kind, model, tokens):
    """The smallest gap between a token's top-k-th and next expert probability, in float64."""
    if kind == "qwen3":
        return float("inf"), 0
    wide = build(kind).to(torch.float64).eval()
    wide.load_state_dict({k: v.to(torch.float64) for k, v in model.state_dict().items()})
    logits = []

    def keep(_module, _inputs, out):  # the router returns (logits, scores, indices)
        logits.append((out[0] if isinstance(out, tuple) else out).detach())

    hooks = [layer.mlp.gate.register_forward_hook(keep) for layer in wide.model.layers if hasattr(layer.mlp, "gate")
             and hasattr(layer.mlp, "experts")]
    with torch.no_grad():
        wide(torch.tensor([tokens], dtype=torch.long))
    for h in hooks:
        h.remove()
    k = wide.config.num_experts_per_tok
    smallest = float("inf")
    for layer_logits in logits:
        probs = torch.softmax(layer_logits, dim=-1).sort(dim=-1, descending=True).values
        smallest = min(smallest, float((probs[:, k - 1] - probs[:, k]).min()))
    return smallest, len(logits)


def greedy(model, prompt):
    """Greedy decoding by full recomputation at each step, with the gap between the best two logits."""
    tokens = list(prompt)
    smallest = float("inf")
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            last = model(torch.tensor([tokens], dtype=torch.long)).logits[0, -1].to(torch.float64)
            best = last.topk(2).values
            smallest = min(smallest, float(best[0] - best[1]))
            tokens.append(int(last.argmax()))
    return tokens[len(prompt):], smallest


def write(kind, out, seed):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, size=TOKENS).tolist()
    prompt = rng.integers(0, VOCAB, size=PROMPT).tolist()
    torch.manual_seed(seed)
    model = build(kind).to(torch.float32).eval()
    randomize(model, seed)
    name = "hf-qwen3-tiny" if kind == "qwen3" else "hf-qwen3-moe-tiny"
    directory = os.path.join(out, name)
    shutil.rmtree(directory, ignore_errors=True)
    model.save_pretrained(directory)
    for extra in os.listdir(directory):
        if extra != "config.json" and not extra.startswith("model"):
            os.remove(os.path.join(directory, extra))

    with torch.no_grad():
        logits = model(torch.tensor([tokens], dtype=torch.long)).logits[0].to(torch.float32).numpy()
    continuation, logit_gap = greedy(model, prompt)
    margin_a, sparse = routing_margin(kind, model, tokens)
    margin_b, _ = routing_margin(kind, model, prompt + continuation)
    margin = min(margin_a, margin_b)
    print(f"{name}: {sorted(os.listdir(directory))}, |logits| <= {np.abs(logits).max():.3f}, "
          f"{sparse} sparse layers, routing margin {margin:.3g}, greedy logit gap {logit_gap:.3g}")
    assert sparse == (0 if kind == "qwen3" else 2), "unexpected number of sparse layers"
    assert margin > MARGIN, "a token's routing is too close to a tie for fp32; change SEED"
    assert logit_gap > MARGIN, "a greedy step is too close to a tie for fp32; change SEED"

    golden = {
        "command": "python3 tools/reference/qwen3_hf_reference.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokens": tokens,
        "shape": list(logits.shape),
        "logits": [float(f"{v:.9g}") for v in logits.reshape(-1)],
        "prompt": prompt,
        "greedy": continuation,
    }
    with open(os.path.join(out, f"hf_{kind}_logits.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ckpt", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write("qwen3", args.out, SEED)
    write("qwen3_moe", args.out, SEED + 1)


if __name__ == "__main__":
    main()
