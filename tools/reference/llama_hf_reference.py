#!/usr/bin/env python3
"""Writes the golden files of mgt's Llama and Mistral import tests with Hugging Face transformers.

Builds two small random models in fp32 with transformers itself, saves them with save_pretrained
and records their logits for one fixed sequence of token ids:

  tests/ckpt/golden/hf-llama-tiny/     LlamaForCausalLM, tied embeddings, one model.safetensors
  tests/ckpt/golden/hf-mistral-tiny/   MistralForCausalLM, untied, head_dim != hidden/heads,
                                       sharded (model.safetensors.index.json and three shards)
  tests/ckpt/golden/hf-llama31-tiny/   LlamaForCausalLM with Llama 3.1's rope scaling (rope_type
                                       llama3, factor 8), one key/value head of 32 channels,
                                       vocabulary 128, with its own 48 tokens
  tests/ckpt/golden/hf_llama_logits.json
                                       {"tokens": [...], "<model dir>": {"shape": [T, V],
                                        "logits": [...]}, ...} with transformers' fp32 logits
                                       (and, for the scaled model, "inv_freq": transformers'
                                       scaled inverse frequencies)

tests/ckpt/test_hf_llama.cpp imports each directory with mgt-ckpt-convert's loader, runs mgt's
forward on the CPU backend (fp32) and compares its logits with these.

Both models have two layers, hidden size 32, four query heads sharing two key/value heads
(grouped-query attention), intermediate size 88, a vocabulary of 300 and rotary bases of
Llama 3 (500000) and Mistral v0.2 (1e6). The third model's 16 frequencies fall in all three bands of
Llama 3.1's scaling (kept, interpolated, divided by the factor); the script checks that its logits
differ from the unscaled model's by far more than the tests' tolerance. Their weights are drawn with a larger spread than the
default initialisation, and the norms' weights away from 1, so that a wrong row order anywhere
changes the logits visibly.

  python3 tools/reference/llama_hf_reference.py [--out tests/ckpt/golden]

Needs torch and transformers (written with torch 2.15 and transformers 5.24; any version that has
MistralForCausalLM and head_dim should give the same files up to config.json's version keys).
"""
import argparse
import os

import numpy as np
import torch
import transformers

from hf_golden import logits_of, randomize, save_model_directory, write_json

VOCAB = 300
TOKENS = 16
# The scaled model: a longer sequence, so that its slowest frequencies turn far enough for the
# scaling to show, over a smaller vocabulary, so that the file stays small.
SCALED_VOCAB = 128
SCALED_TOKENS = 48
SEED = 1234


def build_llama():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=88, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=500000.0,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    return transformers.LlamaForCausalLM(config)


def build_mistral():
    config = transformers.MistralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=88, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        sliding_window=None, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    return transformers.MistralForCausalLM(config)


def build_llama31():
    config = transformers.LlamaConfig(
        vocab_size=SCALED_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    return transformers.LlamaForCausalLM(config)


def unscaled_logits(model, tokens):
    """The same weights without rope scaling: how far the scaling moves the logits."""
    config = model.config.to_dict()
    config.pop("rope_scaling", None)
    params = config.get("rope_parameters")
    if isinstance(params, dict):
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": params["rope_theta"]}
    plain = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config)).to(torch.float32).eval()
    plain.load_state_dict(model.state_dict())
    return logits_of(plain, tokens)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ckpt", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    tokens = np.random.default_rng(SEED).integers(0, VOCAB, size=TOKENS).tolist()
    golden = {
        "command": "python3 tools/reference/llama_hf_reference.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokens": tokens,
    }
    models = [("hf-llama-tiny", build_llama, 1, None), ("hf-mistral-tiny", build_mistral, 2, "80KB"),
              ("hf-llama31-tiny", build_llama31, 3, None)]
    for name, build, seed, shard_size in models:
        torch.manual_seed(seed)
        model = build().to(torch.float32).eval()
        randomize(model, seed)
        if model.config.tie_word_embeddings:
            model.tie_weights()
        directory = os.path.join(args.out, name)
        save_model_directory(model, directory, shard_size)
        model_tokens = tokens
        if name == "hf-llama31-tiny":
            model_tokens = np.random.default_rng(SEED + 3).integers(0, SCALED_VOCAB, size=SCALED_TOKENS).tolist()
        logits = logits_of(model, model_tokens)
        golden[name] = {"shape": list(logits.shape), "logits": [float(f"{v:.9g}") for v in logits.reshape(-1)]}
        if name == "hf-llama31-tiny":
            golden[name]["tokens"] = model_tokens
            golden[name]["inv_freq"] = [float(f"{v:.9g}") for v in model.model.rotary_emb.inv_freq.tolist()]
            moved = float(np.abs(unscaled_logits(model, model_tokens) - logits).max())
            bound = 1e-5 * float(np.abs(logits).max())
            print(f"{name}: the scaling moves the logits by up to {moved:.3g} (test tolerance {bound:.3g})")
            assert moved > 100 * bound, "the scaled model's logits must tell scaling from none"

        print(f"{name}: {sorted(os.listdir(directory))}, |logits| <= {np.abs(logits).max():.3f}")

    write_json(os.path.join(args.out, "hf_llama_logits.json"), golden)


if __name__ == "__main__":
    main()
