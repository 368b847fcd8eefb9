#!/usr/bin/env python3
"""Independent check of mgt-eval: Megatron's zero-shot LAMBADA and WikiText-103 evaluation
(v0.13 tasks/zeroshot_gpt, as described in spec/megatron.md section 8), written from the method
itself over torch + transformers, on a Hugging Face GPT-2 export of the same checkpoint
(mgt-ckpt-convert --loader mgt --saver hf).

It follows Megatron literally where mgt-eval takes shortcuts with the same result: every sample
is padded with eod to seq_length + 1 tokens, every window of the formula is run (even those past
the end of the text), and the argmax is taken over the whole (padded) vocabulary. Only the
handling of LAMBADA examples longer than seq_length + 1 tokens is mgt's (Megatron fails on them):
they keep their last seq_length + 1 tokens and are counted as truncated.

Requirements (PyPI; torch from download.pytorch.org/whl/cpu is enough):
  pip install torch transformers safetensors numpy tokenizers regex
Usage:
  python3 tools/reference/zeroshot_reference.py --hf-dir HFDIR --task LAMBADA \\
      --valid-data datasets/lambada_test.jsonl [--strict-lambada] --seq-length 1024 \\
      --tokenizer-type GPT2BPETokenizer --vocab-file datasets/gpt2-vocab.json \\
      --merge-file datasets/gpt2-merges.txt [--micro-batch-size 8] [--limit N]
  python3 tools/reference/zeroshot_reference.py --hf-dir HFDIR --task WIKITEXT103 \\
      --valid-data datasets/wikitext-103.wiki.test.tokens --overlapping-eval 32 ...
Prints one JSON object with the fields mgt-eval writes (metrics, counts, settings).
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np


# ---- detokenizers (tasks/zeroshot_gpt/detokenizer.py) --------------------------------------

def ptb_detokenizer(string):
    string = string.replace(" '", "'")
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" n't", "n't")
    string = string.replace(" N ", "1 ")
    string = string.replace("$ 1", "$1")
    string = string.replace("# 1", "#1")
    return string


def wikitext_detokenizer(string):
    # contractions
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    # number separators
    string = string.replace(" @-@ ", "-")
    string = string.replace(" @,@ ", ",")
    string = string.replace(" @.@ ", ".")
    # punctuation
    string = string.replace(" : ", ": ")
    string = string.replace(" ; ", "; ")
    string = string.replace(" . ", ". ")
    string = string.replace(" ! ", "! ")
    string = string.replace(" ? ", "? ")
    string = string.replace(" , ", ", ")
    # double brackets
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    # miscellaneous
    string = string.replace("= = = =", "====")
    string = string.replace("= = =", "===")
    string = string.replace("= =", "==")
    string = string.replace(" " + chr(176) + " ", chr(176))
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" N ", " 1 ")
    string = string.replace(" 's", "'s")
    return string


def lambada_detokenizer(string):
    return string


DETOKENIZERS = [("ptb", ptb_detokenizer), ("wiki", wikitext_detokenizer), ("lambada", lambada_detokenizer)]


def detokenizer_for(path):
    for key, fn in DETOKENIZERS:
        if key in path:
            return key, fn
    raise SystemExit(f"{path}: no detokenizer key ('ptb', 'wiki', 'lambada') in the path")


# ---- tokenizers -----------------------------------------------------------------------------

class NullTokenizer:
    def __init__(self, vocab_size):
        self.vocab_size = vocab_size + 1
        self.eod = vocab_size

    def tokenize(self, text):
        return [int(x) for x in text.split(" ")] if text else []


class Gpt2Tokenizer:
    """GPT-2 BPE from the vocab and merges files: HuggingFace `tokenizers` (fast), or with
    --slow-tokenizer the re-statement of Megatron's own gpt2_tokenization.py; both come from
    gpt2_tokenize_reference.py beside this script."""

    def __init__(self, vocab_file, merge_file, slow):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from gpt2_tokenize_reference import MegatronBpe, make_hf
        with open(vocab_file, encoding="utf-8") as f:
            vocab = json.load(f)
        self.vocab_size = len(vocab)
        self.eod = vocab["<|endoftext|>"]
        if slow:
            self.encode = MegatronBpe(vocab_file, merge_file).encode
        else:
            hf = make_hf(vocab_file, merge_file)
            self.encode = lambda text: hf.encode(text).ids

    def tokenize(self, text):
        return self.encode(text) if text else []


def make_tokenizer(args):
    if args.tokenizer_type == "NullTokenizer":
        return NullTokenizer(args.vocab_size)
    if args.tokenizer_type == "GPT2BPETokenizer":
        return Gpt2Tokenizer(args.vocab_file, args.merge_file, args.slow_tokenizer)
    raise SystemExit(f"unsupported tokenizer {args.tokenizer_type}")


# ---- model ------------------------------------------------------------------------------------

class Model:
    def __init__(self, hf_dir):
        import torch
        from transformers import GPT2LMHeadModel
        self.torch = torch
        self.model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()

    def run(self, samples):
        """samples: list of seq_length + 1 ids. Returns (losses [b, s], argmax [b, s], labels)."""
        torch = self.torch
        text = torch.tensor(samples, dtype=torch.long)
        tokens, labels = text[:, :-1], text[:, 1:]
        with torch.no_grad():
            logits = self.model(input_ids=tokens).logits.float()
        losses = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none").view(labels.shape)
        return losses.double(), torch.argmax(logits, dim=-1), labels


def batches(items, size):
    for i in range(0, len(items), size):
        yield items[i:i + size]


# ---- LAMBADA (_LambadaDataset, forward_step 'accuracy') --------------------------------------

def lambada(args, tokenizer, model):
    examples = []
    with open(args.valid_data, "r") as f:
        for line in f.readlines():
            text = json.loads(line)["text"]
            if not args.strict_lambada:
                tokens = tokenizer.tokenize(text)
                context, target = tokens[:-1], [tokens[-1]]
            else:
                last = text.split()[-1]
                start = text.rfind(last)
                context = tokenizer.tokenize(text[:start].strip())
                target = tokenizer.tokenize(" " + last)
            examples.append((context, target))
            if args.limit and len(examples) == args.limit:
                break

    seq = args.seq_length
    samples, masks, truncated = [], [], 0
    for context, target in examples:
        tokens = context + target
        mask = [0] * len(context) + [1] * len(target)
        if len(tokens) > seq + 1:  # mgt's rule: keep the last seq + 1 tokens
            truncated += 1
            tokens, mask = tokens[-(seq + 1):], mask[-(seq + 1):]
        pad = seq + 1 - len(tokens)
        samples.append(tokens + [tokenizer.eod] * pad)
        masks.append((mask + [0] * pad)[1:])

    correct, target_tokens, loss_sum = 0, 0, 0.0
    torch = model.torch
    for batch in batches(list(range(len(samples))), args.micro_batch_size):
        losses, argmax, labels = model.run([samples[i] for i in batch])
        mask = torch.tensor([masks[i] for i in batch], dtype=torch.bool)
        right = (argmax == labels) | ~mask
        correct += int(right.all(dim=-1).sum())
        target_tokens += int(mask.sum())
        loss_sum += float((losses * mask).sum())
        print(f"> {batch[-1] + 1}/{len(samples)} examples", file=sys.stderr)

    avg = loss_sum / target_tokens
    return {
        "task": "LAMBADA",
        "valid_data": args.valid_data,
        "accuracy": correct / len(examples),
        "target_avg_loss": avg,
        "target_ppl": math.exp(avg),
        "counts": {"examples": len(examples), "correct": correct, "truncated": truncated,
                   "target_tokens": target_tokens},
        "settings": {"seq_length": seq, "micro_batch_size": args.micro_batch_size,
                     "strict_lambada": args.strict_lambada},
    }


# ---- WikiText-103 (_LMDataset, forward_step 'loss') ------------------------------------------

def wikitext(args, tokenizer, model):
    with open(args.valid_data, "rb") as reader:
        entire_data = reader.read().decode("utf-8")
    num_original_tokens = len(entire_data.strip().split(" "))
    key, detokenize = detokenizer_for(args.valid_data)
    tokens = tokenizer.tokenize(detokenize(entire_data))
    seq, stride = args.seq_length, max(1, args.overlapping_eval)
    total_targets = len(tokens) - 1
    windows = max(math.ceil(max(total_targets - stride, 0) / stride) + 1, 1)

    def window(idx):
        start = idx * stride
        text = tokens[start:start + seq + 1]
        pad_mask = [1] * len(text) + [0] * (seq + 1 - len(text))
        text = text + [tokenizer.eod] * (seq + 1 - len(text))
        pad_mask = np.array(pad_mask[1:])
        if stride != seq and idx != 0:
            pad_mask[:-stride] *= 0
        return text, pad_mask.tolist()

    torch = model.torch
    loss_sum, scored = 0.0, 0
    for batch in batches(list(range(windows)), args.micro_batch_size):
        built = [window(i) for i in batch]
        losses, _, _ = model.run([t for t, _ in built])
        mask = torch.tensor([m for _, m in built], dtype=torch.double)
        loss_sum += float((losses * mask).sum())
        scored += int(mask.sum())
        if (batch[0] // args.micro_batch_size) % 50 == 0:
            print(f"> {batch[-1] + 1}/{windows} windows", file=sys.stderr)

    avg = loss_sum / (len(tokens) - 1)
    ratio = (len(tokens) - 1) / (num_original_tokens - 1)
    return {
        "task": "WIKITEXT103",
        "valid_data": args.valid_data,
        "avg_loss": avg,
        "ppl": math.exp(min(20, avg)),
        "adjusted_ppl": math.exp(min(20, avg * ratio)),
        "token_ratio": ratio,
        "counts": {"original_tokens": num_original_tokens, "detokenized_tokens": len(tokens),
                   "windows": windows, "scored_targets": scored},
        "settings": {"seq_length": seq, "micro_batch_size": args.micro_batch_size,
                     "overlapping_eval": stride, "detokenizer": key},
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hf-dir", required=True)
    p.add_argument("--task", required=True, choices=["LAMBADA", "WIKITEXT103"])
    p.add_argument("--valid-data", required=True)
    p.add_argument("--strict-lambada", action="store_true")
    p.add_argument("--overlapping-eval", type=int, default=32)
    p.add_argument("--seq-length", type=int, required=True)
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--tokenizer-type", default="GPT2BPETokenizer")
    p.add_argument("--vocab-file")
    p.add_argument("--merge-file")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--slow-tokenizer", action="store_true", help="Megatron's Python BPE instead of HF tokenizers")
    p.add_argument("--limit", type=int, default=0, help="LAMBADA: only the first N examples")
    args = p.parse_args()

    tokenizer = make_tokenizer(args)
    model = Model(args.hf_dir)
    result = (lambada if args.task == "LAMBADA" else wikitext)(args, tokenizer, model)
    result["checkpoint"] = {"directory": args.hf_dir}
    print(json.dumps(result, indent=4))


if __name__ == "__main__":
    main()
