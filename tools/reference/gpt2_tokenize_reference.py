#!/usr/bin/env python3
"""Reference GPT-2 byte-level BPE ids, to check mgt's Gpt2BpeTokenizer against.

Three independent encoders built from the same vocab/merges files:
  megatron   the algorithm of Megatron v0.13's gpt2_tokenization.py (Python `regex` findall,
             byte->unicode map, merge-rank BPE with a per-piece cache), written from its spec;
  tiktoken   a tiktoken Encoding whose ranks are rebuilt from the files (no download);
  hf         a HuggingFace `tokenizers` ByteLevel BPE model loaded from the files.
None of them parses special tokens: a literal "<|endoftext|>" is ordinary text.

Requirements: pip install regex tiktoken tokenizers

Commands:
  ids     TEXTFILE...          print one line of ids per input (JSONL "text" fields, or whole files)
  compare TEXTFILE... [--stress N]  check that the three encoders agree on every input and on
                               N random multilingual strings, and that decode inverts encode
  bench   TEXTFILE...          single-thread MB/s (wall and thread CPU) of tiktoken and hf
  golden  OUT.jsonl            write the golden file used by tests/tokenizer/test_gpt2_bpe.cpp
  classes OUT.txt              list "codepoint flags" (1 \\s, 2 \\p{L}, 4 \\p{N}) as `regex` sees them

Options, before the command: --vocab PATH --merges PATH (default: this repository's datasets/).
The golden file is regenerated with:
  python3 tools/reference/gpt2_tokenize_reference.py golden tests/tokenizer/golden/gpt2_golden.jsonl
"""
import argparse
import json
import os
import random
import sys
import time

import regex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    kept = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {b: chr(b) for b in kept}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


class MegatronBpe:
    """Megatron v0.13's GPT2Tokenizer.tokenize + convert_tokens_to_ids, re-stated."""

    def __init__(self, vocab_path, merges_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {v: k for k, v in self.encoder.items()}
        with open(merges_path, encoding="utf-8") as f:
            lines = f.read().split("\n")[1:-1]
        self.ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.pat = regex.compile(PATTERN)
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = list(token)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == best[0] and word[i + 1] == best[1]:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        self.cache[token] = word
        return word

    def encode(self, text):
        ids = []
        for piece in self.pat.findall(text):
            mapped = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder.get(t, 0) for t in self.bpe(mapped))
        return ids

    def decode(self, ids):
        text = "".join(self.decoder[i] for i in ids)
        return bytearray(self.byte_decoder[c] for c in text).decode("utf-8", errors="replace")


def make_tiktoken(vocab_path, merges_path):
    import tiktoken

    encoder = json.load(open(vocab_path, encoding="utf-8"))
    byte_decoder = {v: k for k, v in bytes_to_unicode().items()}
    to_bytes = lambda s: bytes(byte_decoder[c] for c in s)
    ranks = {}
    for s, i in encoder.items():
        if s != "<|endoftext|>":
            ranks[to_bytes(s)] = i
    # tiktoken merges by the rank of the concatenated bytes; with GPT-2's files the id of a merged
    # token equals 256 + its merge line, so the ids can serve as ranks directly.
    with open(merges_path, encoding="utf-8") as f:
        for n, line in enumerate(f.read().split("\n")[1:-1]):
            a, b = line.split()
            assert ranks[to_bytes(a + b)] == 256 + n, line
    return tiktoken.Encoding(
        name="gpt2-from-files",
        pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": encoder["<|endoftext|>"]},
    )


def make_hf(vocab_path, merges_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(vocab_path, merges_path))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def read_texts(paths):
    """JSONL files give their "text" fields; any other file is one text."""
    for path in paths:
        if path.endswith(".jsonl"):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        yield json.loads(line)["text"]
        else:
            with open(path, encoding="utf-8") as f:
                yield f.read()


def unicode_stress_texts(seed, count):
    """Random strings over every class the pre-tokenizer distinguishes, contractions included."""
    rng = random.Random(seed)
    spaces = [0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x20, 0x20, 0x85, 0xA0, 0x1680, 0x2003, 0x2028,
              0x202F, 0x3000]
    near_space = [0x1C, 0x1D, 0x1E, 0x1F, 0x200B, 0x180E, 0xFEFF]  # not \s in `regex`
    fragments = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'x", "''",
                 " '", "n't", "DON'T", "<|endoftext|>", "\r\n", "  ", "\n\n", "..."]
    ranges = [(0x21, 0x7E), (0x41, 0x5A), (0x61, 0x7A), (0x30, 0x39), (0xC0, 0x24F),
              (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2150, 0x218F),
              (0x2460, 0x24FF), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
              (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF),
              (0xE000, 0xF8FF), (0xF0000, 0xF00FF), (0x80, 0x9F), (0x0, 0x1F)]
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 40)):
            kind = rng.random()
            if kind < 0.25:
                parts.append(chr(rng.choice(spaces)) * rng.randint(1, 3))
            elif kind < 0.35:
                parts.append(rng.choice(fragments))
            elif kind < 0.40:
                parts.append(chr(rng.choice(near_space)))
            else:
                lo, hi = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8))))
        yield "".join(parts)


def cmd_ids(args):
    enc = MegatronBpe(args.vocab, args.merges)
    for text in read_texts(args.files):
        print(" ".join(map(str, enc.encode(text))))


def cmd_compare(args):
    meg = MegatronBpe(args.vocab, args.merges)
    tik = make_tiktoken(args.vocab, args.merges)
    hf = make_hf(args.vocab, args.merges)
    texts = list(read_texts(args.files)) + list(unicode_stress_texts(1, args.stress))
    bad = {"tiktoken": 0, "hf": 0}
    for text in texts:
        ref = meg.encode(text)
        if tik.encode_ordinary(text) != ref:
            bad["tiktoken"] += 1
        if hf.encode(text).ids != ref:
            bad["hf"] += 1
        assert meg.decode(ref) == text
    print(f"{len(texts)} texts; disagreements with megatron: {bad}")


def cmd_bench(args):
    """Wall and thread-CPU MB/s (best of 3), one text at a time on one thread."""
    texts = list(read_texts(args.files))
    total = sum(len(t.encode("utf-8")) for t in texts)
    tik = make_tiktoken(args.vocab, args.merges)
    hf = make_hf(args.vocab, args.merges)
    for name, fn in [("tiktoken encode_ordinary", tik.encode_ordinary),
                     ("hf tokenizers encode", lambda t: hf.encode(t).ids)]:
        wall, cpu = float("inf"), float("inf")
        for _ in range(3):
            w0, c0 = time.perf_counter(), time.thread_time()
            n = sum(len(fn(t)) for t in texts)
            wall = min(wall, time.perf_counter() - w0)
            cpu = min(cpu, time.thread_time() - c0)
        print(f"{name}: wall {total / wall / 1e6:.1f} MB/s, cpu {total / cpu / 1e6:.1f} MB/s "
              f"({total} bytes, {n} tokens, best of 3)")


def cmd_golden(args):
    """A small golden set: slices of the bundled corpora plus random multilingual strings."""
    enc = MegatronBpe(args.vocab, args.merges)
    tik = make_tiktoken(args.vocab, args.merges)
    texts = []
    with open(os.path.join(ROOT, "datasets", "wikitext-103.wiki.test.tokens"), encoding="utf-8") as f:
        texts.append("".join(f.readlines()[:40]))
    lambada = list(read_texts([os.path.join(ROOT, "datasets", "lambada_test.jsonl")]))
    texts += [t for t in lambada if any(ord(c) > 127 for c in t)][:3]
    texts += list(unicode_stress_texts(7, 60))
    # Words longer than mgt's short-piece limit (48 bytes) and its cache limit (256 bytes).
    rng = random.Random(3)
    alphabet = "etaoinshrdlucmfwyp" + "ETAOIN" + "\u00e9\u00fc\u00df\u0436\u0434\u65e5\u672c"
    for n in (49, 120, 300, 1500):
        texts.append(" " + "".join(rng.choice(alphabet) for _ in range(n)) + " 1234567890" * (n // 40))
    texts.append("a" * 333 + " " + "ab" * 100 + " " + "!?" * 70 + "\n" * 90 + " x")
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"comment": "GPT-2 BPE ids from the Python reference (Megatron v0.13 "
                              "algorithm, checked against tiktoken). Regenerate with: python3 "
                              "tools/reference/gpt2_tokenize_reference.py golden "
                              "tests/tokenizer/golden/gpt2_golden.jsonl"}) + "\n")
        for text in texts:
            ids = enc.encode(text)
            assert tik.encode_ordinary(text) == ids, text
            out.write(json.dumps({"text": text, "ids": ids}, ensure_ascii=False) + "\n")


def cmd_classes(args):
    space, letter, number = regex.compile(r"\s"), regex.compile(r"\p{L}"), regex.compile(r"\p{N}")
    with open(args.out, "w") as out:
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            flags = (1 if space.match(c) else 0) | (2 if letter.match(c) else 0) | \
                    (4 if number.match(c) else 0)
            if flags:
                out.write(f"{cp} {flags}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", default=os.path.join(ROOT, "datasets", "gpt2-vocab.json"))
    parser.add_argument("--merges", default=os.path.join(ROOT, "datasets", "gpt2-merges.txt"))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ids"); p.add_argument("files", nargs="+"); p.set_defaults(fn=cmd_ids)
    p = sub.add_parser("compare"); p.add_argument("files", nargs="*")
    p.add_argument("--stress", type=int, default=2000); p.set_defaults(fn=cmd_compare)
    p = sub.add_parser("bench"); p.add_argument("files", nargs="+"); p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("golden"); p.add_argument("out"); p.set_defaults(fn=cmd_golden)
    p = sub.add_parser("classes"); p.add_argument("out"); p.set_defaults(fn=cmd_classes)
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
