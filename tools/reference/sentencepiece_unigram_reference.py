#!/usr/bin/env python3
"""Golden ids of the sentencepiece Python package for the bundled unigram model, on texts where
segmentations tie: the package (0.2.x) and Debian's libsentencepiece (0.1.97) break ties between
equal-scoring segmentations differently ("o" + "oo" against "oo" + "o"), and mgt's own unigram
encoder follows the package, which is what Megatron-LM runs.

Texts: lines and paragraphs of the bundled corpora, runs of repeated characters inside words,
and seeded random strings over letters, punctuation and characters the nmt_nfkc map rewrites.
Writes the header line and {"text", "ids"} lines that tests/tokenizer/golden_ids.hpp reads, and
beside them spm-unigram-long.json: the count and FNV-1a hash of the ids of one long text (the
first 300,000 bytes of datasets/tinyshakespeare.txt), long enough for the package's rescaling of
path scores past 100,000 to matter.

Requirements: pip install sentencepiece
Usage: tools/reference/sentencepiece_unigram_reference.py [OUT]
       (default OUT: tests/tokenizer/golden/spm-unigram-ties.jsonl)
"""
import json
import os
import random
import sys

import sentencepiece

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = "datasets/tokenizer-tests/spm-unigram.model"


def corpus_texts():
    texts = []
    with open(os.path.join(ROOT, "datasets/tinyshakespeare.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")[:1200]
    texts += [l for l in lines if l.strip()]
    paragraph = []
    for line in lines:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            texts.append("\n".join(paragraph))
            paragraph = []
    with open(os.path.join(ROOT, "datasets/corpus-gutenberg.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 60:
                break
            texts.append(json.loads(line)["text"][:2000])
    with open(os.path.join(ROOT, "datasets/wikitext-2.wiki.test.tokens"), encoding="utf-8") as f:
        texts += [l for l in f.read().split("\n")[:600] if l.strip()]
    return texts


def tie_texts(rng):
    letters = "eostarnhlidm-.!?'"
    texts = []
    for _ in range(1200):
        words = []
        for _ in range(rng.randint(1, 6)):
            c = rng.choice(letters)
            words.append(rng.choice(["", "b", "c", "wh", "Th"]) + c * rng.randint(2, 9) + rng.choice(["", "s", "d", "n", "."]))
        texts.append(" ".join(words))
    return texts


def random_texts(rng):
    alphabet = [" ", " ", " ", "e", "t", "h", "a", "n", "s", "r", "i", "o", "T", "\n", "\t", "1", "0", ".", ",",
                "'", "\u00e9", "\u65e5", "\U0001f600", "\u2581", "\u0301", "\ufffd", "<", "\uff21", "\ufb01",
                "\u2460", "\uff76", "\u00ad", "\x01", "\x7f", "\u3000", "\u00a0", "\u200d", "\u2122", "\u00bd", "\r"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(1000)]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/tokenizer/golden/spm-unigram-ties.jsonl")
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(ROOT, MODEL))
    rng = random.Random(20261126)
    texts = corpus_texts() + tie_texts(rng) + random_texts(rng)
    header = {"comment": f"GPTSentencePieceTokenizer ids (encode_as_ids) of the sentencepiece package "
                         f"{sentencepiece.__version__}. Regenerate with: "
                         f"python3 tools/reference/sentencepiece_unigram_reference.py",
              "tokenizer_type": "GPTSentencePieceTokenizer", "tokenizer_model": MODEL, "flags": {},
              "vocab_size": sp.get_piece_size(), "eod": sp.eos_id(), "bos": sp.bos_id(), "pad": sp.pad_id()}
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n")
        for t in texts:
            f.write(json.dumps({"text": t, "ids": sp.encode(t)}, ensure_ascii=False) + "\n")
    print(f"{out}: {len(texts)} texts")
    with open(os.path.join(ROOT, "datasets/tinyshakespeare.txt"), "rb") as f:
        long_text = f.read(300000).decode("utf-8")
    ids = sp.encode(long_text)
    h = 0xCBF29CE484222325
    for i in ids:
        h = ((h ^ i) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    long_out = os.path.join(os.path.dirname(out), "spm-unigram-long.json")
    with open(long_out, "w", encoding="utf-8") as f:
        json.dump({"source": "datasets/tinyshakespeare.txt", "bytes": 300000, "ids": len(ids),
                   "ids_fnv1a64": f"{h:016x}"}, f)
        f.write("\n")
    print(f"{long_out}: {len(ids)} ids")


if __name__ == "__main__":
    main()
