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
import os

import transformers

from hf_golden import write_generation_model

VOCAB = 128
TOKENS = 16
PROMPT = 6
NEW_TOKENS = 8
SEED = 2468


def build_qwen2_moe():
    config = transformers.Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1],
        router_aux_loss_coef=0.02, use_sliding_window=False, bos_token_id=1, eos_token_id=2)
    config._experts_implementation = "eager"
    return transformers.Qwen2MoeForCausalLM(config)


def routers(model):
    """The sparse blocks' routers (a dense layer's MLP has no shared expert)."""
    return [layer.mlp.gate for layer in model.model.layers if hasattr(layer.mlp, "shared_expert")]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ckpt", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_generation_model(args.out, "hf-qwen2-moe-tiny", "hf_qwen2_moe_logits.json",
                           "python3 tools/reference/qwen2_moe_hf_reference.py", build_qwen2_moe, SEED, VOCAB, TOKENS,
                           PROMPT, NEW_TOKENS, routers=routers, sparse_layers=2)


if __name__ == "__main__":
    main()
