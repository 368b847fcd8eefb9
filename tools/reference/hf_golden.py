"""What the golden-file scripts of the Hugging Face import tests share (llama_hf_reference.py,
mixtral_hf_reference.py, qwen2_moe_hf_reference.py, qwen3_hf_reference.py): random weights of a
wide spread, the model directory as save_pretrained writes it, transformers' logits and greedy
tokens, and the margins that keep fp32 rounding from changing a routing choice or a greedy step.
Not a script itself. Needs torch and transformers."""
import json
import os
import shutil

import numpy as np
import torch
import transformers

# Smallest accepted gap, in float64, between the probabilities of a token's k-th and (k+1)-th
# expert, and between a greedy step's best and second-best logits.
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


def save_model_directory(model, directory, max_shard_size=None):
    """save_pretrained into a fresh `directory`, keeping only what a model directory needs (no
    generation_config.json); safetensors with transformers 4 too."""
    shutil.rmtree(directory, ignore_errors=True)
    save = {"safe_serialization": True} if int(transformers.__version__.split(".")[0]) < 5 else {}
    if max_shard_size:
        save["max_shard_size"] = max_shard_size
    model.save_pretrained(directory, **save)
    for extra in os.listdir(directory):
        if extra != "config.json" and not extra.startswith("model"):
            os.remove(os.path.join(directory, extra))


def logits_of(model, tokens):
    """The model's fp32 logits for one sequence, [tokens, vocab]."""
    with torch.no_grad():
        return model(torch.tensor([tokens], dtype=torch.long)).logits[0].to(torch.float32).numpy()


def greedy(model, prompt, new_tokens):
    """Greedy decoding by full recomputation at each step, with the gap between the best two logits."""
    tokens = list(prompt)
    smallest = float("inf")
    with torch.no_grad():
        for _ in range(new_tokens):
            last = model(torch.tensor([tokens], dtype=torch.long)).logits[0, -1].to(torch.float64)
            best = last.topk(2).values
            smallest = min(smallest, float(best[0] - best[1]))
            tokens.append(int(last.argmax()))
    return tokens[len(prompt):], smallest


def routing_margin(build, model, tokens, routers):
    """The smallest gap between a token's top-k-th and next expert probability, in float64, and the
    number of routers: `build()` makes the model anew, `routers(model)` lists its routers (each
    returning its logits, or a tuple whose first element they are, as transformers 5's do)."""
    wide = build().to(torch.float64).eval()
    wide.load_state_dict({k: v.to(torch.float64) for k, v in model.state_dict().items()})
    logits = []

    def keep(_module, _inputs, out):
        logits.append((out[0] if isinstance(out, tuple) else out).detach())

    hooks = [router.register_forward_hook(keep) for router in routers(wide)]
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


def write_generation_golden(path, command, tokens, logits, prompt, continuation):
    """{"command", "torch", "transformers", "tokens", "shape", "logits", "prompt", "greedy"} as the
    tests read it (tests/ckpt/hf_testing.hpp golden_generation)."""
    golden = {
        "command": command,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokens": tokens,
        "shape": list(logits.shape),
        "logits": [float(f"{v:.9g}") for v in logits.reshape(-1)],
        "prompt": prompt,
        "greedy": continuation,
    }
    write_json(path, golden)


def write_json(path, value):
    """JSON without spaces, one line."""
    with open(path, "w") as f:
        json.dump(value, f, separators=(",", ":"))
        f.write("\n")


def sample_tokens(seed, vocab, tokens, prompt):
    """The fixed sequence and prompt of token ids of a seed."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, size=tokens).tolist(), rng.integers(0, vocab, size=prompt).tolist()


def write_generation_model(out, name, golden_file, command, build, seed, vocab, tokens, prompt, new_tokens,
                           routers=None, sparse_layers=None):
    """The whole golden of a generation test: `build()`'s model in fp32 with random weights of
    `seed`, saved as out/name; its logits for `tokens` random ids and the greedy continuation of a
    `prompt`-id prompt written to out/golden_file. With `routers` (routing_margin's), the routing
    of both sequences must be clear of ties, and `sparse_layers` routers found."""
    token_ids, prompt_ids = sample_tokens(seed, vocab, tokens, prompt)
    torch.manual_seed(seed)
    model = build().to(torch.float32).eval()
    randomize(model, seed)
    directory = os.path.join(out, name)
    save_model_directory(model, directory)
    logits = logits_of(model, token_ids)
    continuation, logit_gap = greedy(model, prompt_ids, new_tokens)
    shown = f"{name}: {sorted(os.listdir(directory))}, |logits| <= {np.abs(logits).max():.3f}, "
    if routers is not None:
        margin, found = routing_margin(build, model, token_ids, routers)
        margin = min(margin, routing_margin(build, model, prompt_ids + continuation, routers)[0])
        shown += f"{found} sparse layers, routing margin {margin:.3g}, "
        assert sparse_layers is None or found == sparse_layers, f"expected {sparse_layers} sparse layers"
        assert margin > MARGIN, "a token's routing is too close to a tie for fp32; change the seed"
    print(shown + f"greedy logit gap {logit_gap:.3g}")
    assert logit_gap > MARGIN, "a greedy step is too close to a tie for fp32; change the seed"
    write_generation_golden(os.path.join(out, golden_file), command, token_ids, logits, prompt_ids, continuation)
