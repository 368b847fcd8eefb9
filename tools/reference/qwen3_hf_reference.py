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
import os

import transformers

from hf_golden import write_generation_model

VOCAB = 128
TOKENS = 16
PROMPT = 6
NEW_TOKENS = 8
SEED = 1357


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


def routers(model):
    """The sparse blocks' routers (a dense layer's MLP has no experts)."""
    return [layer.mlp.gate for layer in model.model.layers if hasattr(layer.mlp, "experts")]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ckpt", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    command = "python3 tools/reference/qwen3_hf_reference.py"
    write_generation_model(args.out, "hf-qwen3-tiny", "hf_qwen3_logits.json", command, lambda: build("qwen3"), SEED,
                           VOCAB, TOKENS, PROMPT, NEW_TOKENS)
    write_generation_model(args.out, "hf-qwen3-moe-tiny", "hf_qwen3_moe_logits.json", command,
                           lambda: build("qwen3_moe"), SEED + 1, VOCAB, TOKENS, PROMPT, NEW_TOKENS, routers=routers,
                           sparse_layers=2)


if __name__ == "__main__":
    main()
