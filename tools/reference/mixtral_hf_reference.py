#!/usr/bin/env python3
"""Writes the golden files of mgt's Mixtral import tests with Hugging Face transformers.

Builds a small random MixtralForCausalLM in fp32 with transformers itself, saves it with
save_pretrained (the per-expert layout the Hub's Mixtral checkpoints have:
block_sparse_moe.gate, block_sparse_moe.experts.E.w1/w2/w3) and records its logits for one fixed
sequence of token ids, and the tokens its greedy decoding adds to a prompt:

  tests/ckpt/golden/hf-mixtral-tiny/   MixtralForCausalLM: 2 layers, hidden size 32, four query
                                       heads sharing two key/value heads, 4 experts of
                                       intermediate size 24, top-2 routing, untied, vocabulary
                                       128, rope_theta 1e6; config.json and one model.safetensors
  tests/ckpt/golden/hf_mixtral_logits.json
                                       {"tokens": [...], "shape": [T, V], "logits": [...],
                                        "prompt": [...], "greedy": [...]} with transformers'
                                       fp32 logits and greedy continuation

tests/ckpt/test_hf_mixtral.cpp imports the directory with mgt-ckpt-convert's loader, runs mgt's
forward on the CPU backend (fp32) and compares its logits with these, and decodes the prompt
greedily with mgt's key/value cache.

The weights are drawn with a larger spread than the default initialisation, and the norms'
weights away from 1, so that a wrong row order anywhere changes the logits visibly. Mixtral's
routing picks the two largest of four probabilities per token and layer; fp32 rounding must not
be able to change that choice, so the script checks (in float64) that every token's second and
third probabilities, and every greedy step's two best logits, lie well apart.

  python3 tools/reference/mixtral_hf_reference.py [--out tests/ckpt/golden]

Needs torch and transformers (written with torch 2.15 and transformers 5.24, whose
save_pretrained writes the original per-expert names; transformers 4 from 4.36 on writes the
same names).
"""
import argparse
import os

import transformers

from hf_golden import write_generation_model

VOCAB = 128
TOKENS = 16
PROMPT = 6
NEW_TOKENS = 8
SEED = 4321


def build_mixtral():
    config = transformers.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=1000000.0,
        sliding_window=None, tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2,
        router_aux_loss_coef=0.02, bos_token_id=1, eos_token_id=2)
    # transformers 5's plain loop over the experts (its grouped GEMM takes no float64).
    config._experts_implementation = "eager"
    return transformers.MixtralForCausalLM(config)


def routers(model):
    """Each layer's router: transformers 5 names the sparse block mlp, transformers 4 block_sparse_moe."""
    return [(getattr(layer, "mlp", None) or layer.block_sparse_moe).gate for layer in model.model.layers]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ckpt", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_generation_model(args.out, "hf-mixtral-tiny", "hf_mixtral_logits.json",
                           "python3 tools/reference/mixtral_hf_reference.py", build_mixtral, SEED, VOCAB, TOKENS,
                           PROMPT, NEW_TOKENS, routers=routers, sparse_layers=2)


if __name__ == "__main__":
    main()
