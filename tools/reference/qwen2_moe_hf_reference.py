#!/usr/bin/env python3
"""Writes the golden files of mgt's Qwen2-MoE import tests with Hugging Face transformers.

Builds a small random Qwen2MoeForCausalLM in fp32 with transformers itself, saves it with
save_pretrained (the per-expert layout the Hub's Qwen2-MoE checkpoints have: mlp.gate,
mlp.experts.E.gate_proj/up_proj/down_proj, mlp.shared_expert.*, mlp.shared_expert_gate) and
records its logits for one fixed sequence of token ids, and the tokens its greedy decoding adds to
a prompt:

  tests/ckpt/golden/hf-qwen2-moe-tiny/ Qwen2MoeForCausalLM: 3 layers (the middle one dense through
                                       mlp_only_layers, of intermediate size 40), hidden size 32,
                                       four query heads sharing two key/value heads with q, k, v
                                       biases, 4 experts of moe_intermediate_size 16, top-2 without
                                       renormalisation (norm_topk_prob false), a gated shared expert
                                       of 24, untied, vocabulary 128; config.json and one
                                       model.safetensors
  tests/ckpt/golden/hf_qwen2_moe_logits.json
                                       {"tokens": [...], "shape": [T, V], "logits": [...],
                                        "prompt": [...], "greedy": [...]} with transformers'
                                       fp32 logits and greedy continuation

tests/ckpt/test_hf_qwen2_moe.cpp imports the directory with mgt-ckpt-convert's loader, runs mgt's
forward on the CPU backend (fp32) and compares its logits with these, and decodes the prompt
greedily with mgt's key/value cache.

The weights are drawn with a larger spread than the default initialisation (biases included),
and the norms' weights away from 1, so that a wrong row order anywhere changes the logits
visibly. fp32 rounding must not be able to change a routing choice, so the script checks (in
float64) that every token's k-th and (k+1)-th expert probabilities, and every greedy step's two
best logits, lie well apart.

  python3 tools/reference/qwen2_moe_hf_reference.py [--out tests/ckpt/golden]

Needs torch and transformers (written with torch 2.15 and transformers 5.24, whose
save_pretrained writes the original per-expert names).
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
SEED = 2468
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


def build_qwen2_moe():
    config = transformers.Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1],
        router_aux_loss_coef=0.02, use_sliding_window=False, bos_token_id=1, eos_token_id=2)
    config._experts_implementation = "eager"
    return transformers.Qwen2MoeForCausalLM(config)


def routing_margin(model, tokens):
    """The smallest gap between a token's top-k-th and next expert probability, in float64."""
    wide = build_qwen2_moe().to(torch.float64).eval()
    wide.load_state_dict({k: v.to(torch.float64) for k, v in model.state_dict().items()})
    logits = []

    def keep(_module, _inputs, out):  # the router returns (logits, scores, indices)
        logits.append((out[0] if isinstance(out, tuple) else out).detach())

    # The sparse blocks' routers (a dense layer's MLP has no shared expert).
    hooks = [layer.mlp.gate.register_forward_hook(keep) for layer in wide.model.layers
             if hasattr(layer.mlp, "shared_expert")]
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ckpt", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rng = np.random.default_rng(SEED)
    tokens = rng.integers(0, VOCAB, size=TOKENS).tolist()
    prompt = rng.integers(0, VOCAB, size=PROMPT).tolist()
    torch.manual_seed(SEED)
    model = build_qwen2_moe().to(torch.float32).eval()
    randomize(model, SEED)
    name = "hf-qwen2-moe-tiny"
    directory = os.path.join(args.out, name)
    shutil.rmtree(directory, ignore_errors=True)
    save = {"safe_serialization": True} if int(transformers.__version__.split(".")[0]) < 5 else {}
    model.save_pretrained(directory, **save)
    for extra in os.listdir(directory):
        if extra != "config.json" and not extra.startswith("model"):
            os.remove(os.path.join(directory, extra))

    with torch.no_grad():
        logits = model(torch.tensor([tokens], dtype=torch.long)).logits[0].to(torch.float32).numpy()
    continuation, logit_gap = greedy(model, prompt)
    margin_a, sparse_a = routing_margin(model, tokens)
    margin_b, _ = routing_margin(model, prompt + continuation)
    margin = min(margin_a, margin_b)
    print(f"{name}: {sorted(os.listdir(directory))}, |logits| <= {np.abs(logits).max():.3f}, "
          f"{sparse_a} sparse layers, routing margin {margin:.3g}, greedy logit gap {logit_gap:.3g}")
    assert sparse_a == 2, "expected two sparse layers"
    assert margin > MARGIN, "a token's routing is too close to a tie for fp32; change SEED"
    assert logit_gap > MARGIN, "a greedy step is too close to a tie for fp32; change SEED"

    golden = {
        "command": "python3 tools/reference/qwen2_moe_hf_reference.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokens": tokens,
        "shape": list(logits.shape),
        "logits": [float(f"{v:.9g}") for v in logits.reshape(-1)],
        "prompt": prompt,
        "greedy": continuation,
    }
    with open(os.path.join(args.out, "hf_qwen2_moe_logits.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
