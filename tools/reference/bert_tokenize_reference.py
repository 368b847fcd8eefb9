#!/usr/bin/env python3
"""Compares mgt's BERT WordPiece tokenizers with a Python reference on the bundled texts.

The reference implements, with Python's own str.lower(), unicodedata and str.split(), the
algorithm of Megatron v0.13's BertWordPieceLowerCase / BertWordPieceCase
(megatron/training/tokenizer/bert_tokenization.py behind `_BertWordPieceTokenizer`):
clean text, space out CJK ideographs, whitespace split, [lower-case: lower() + NFD + drop Mn],
split punctuation, WordPiece (greedy longest match, "##" continuations, > 200 chars -> [UNK]).

Optionally it also runs:
  --megatron-path DIR  Megatron's own bert_tokenization.FullTokenizer from a Megatron-LM checkout
  --hf                 Hugging Face transformers' slow BertTokenizerLegacy (transformers 5),
                       which differs from Megatron in corners: it NFC-normalizes the text first,
                       drops every category C* character (Megatron drops only Cc and Cf, so an
                       unassigned, private-use or surrogate character becomes [UNK] there), keeps
                       its special tokens ("[CLS]", ...) whole, and gives up on words > 100 chars.
                       On the bundled texts it agrees with the reference everywhere.

Python's unicodedata and ICU must speak the same Unicode version for the synthetic sweep over
all code points to agree (ICU 72 and Python 3.12 both have Unicode 15.0); the bundled texts
agree under any recent version.

mgt's side runs through the hidden Catch2 test "[.bert-reference]" of mgt-tests, which reads
length-prefixed texts and writes length-prefixed ids. Usage:

  python3 tools/reference/bert_tokenize_reference.py --mgt-tests build/tests/mgt-tests [--hf]

Exit status 1 when mgt and the reference disagree on any text.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unicodedata

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = [("uncased", "bert-uncased-vocab.txt", True), ("cased", "bert-cased-vocab.txt", False)]


# ---------------------------------------------------------------- the reference algorithm
def load_vocab(path):
    vocab = {}
    with open(path, "r", encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.strip()] = index
    for token in ("[BOS]", "[EOS]"):  # Megatron's wrapper adds these at len(vocab)
        if token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_tokens(text, lower_case):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf"):
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            cleaned.append(" ")
        elif is_cjk(cp):
            cleaned.append(" " + ch + " ")
        else:
            cleaned.append(ch)
    pieces = []
    for word in "".join(cleaned).split():
        if lower_case:
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                           if unicodedata.category(c) != "Mn")
        current = ""
        for ch in word:
            if is_punct(ch):
                if current:
                    pieces.append(current)
                pieces.append(ch)
                current = ""
            else:
                current += ch
        if current:
            pieces.append(current)
    return " ".join(pieces).split()


def wordpiece_ids(word, vocab):
    if len(word) > 200:
        return [vocab["[UNK]"]]
    ids, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
                start = end
                break
        else:
            return [vocab["[UNK]"]]
    return ids


def reference_ids(text, vocab, lower_case):
    return [i for word in basic_tokens(text, lower_case) for i in wordpiece_ids(word, vocab)]


# ---------------------------------------------------------------- the texts
def ggml_inputs(datasets):
    with open(os.path.join(datasets, "tokenizer-tests", "ggml-vocab-bert-bge.inp"),
              encoding="utf-8") as f:
        return f.read().split("\n__ggml_vocab_test__\n")[:-1]


def bundled_texts(datasets):
    texts = [("ggml", t) for t in ggml_inputs(datasets)]
    for name in ("corpus-gutenberg.jsonl", "corpus-tinyshakespeare.jsonl", "lambada_test.jsonl"):
        with open(os.path.join(datasets, name), encoding="utf-8") as f:
            texts += [(name, json.loads(line)["text"]) for line in f if line.strip()]
    for name in ("wikitext-103.wiki.test.tokens", "wikitext-103.wiki.valid.tokens",
                 "wikitext-2.wiki.test.tokens", "tinyshakespeare.txt"):
        with open(os.path.join(datasets, name), encoding="utf-8") as f:
            whole = f.read()
        texts.append((name, whole))
        texts += [(name + ":lines", line) for line in whole.split("\n")]
    return texts


def synthetic_texts():
    """Every code point in letter context, plus random mixtures, to probe Unicode corners."""
    texts = []
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    for i in range(0, len(cps), 32):
        texts.append(("sweep", " ".join("a" + chr(c) + "B" + chr(c) + "\u03a3" for c in cps[i:i + 32])))
    rng = random.Random(1234)
    alphabet = ([chr(c) for c in range(0x20, 0x250)] + list(" \t\n\r\u00a0\u2028\u3000") +
                ["\u0301", "\u0130", "\u03a3", "\u1e9e", "\ufb01", "\u4e00", "\uf900", "\u00ad",
                 "\u200b", "\ufeff", "\ufffd", "\x00", "\ud800", "##", "[UNK]", "\u1fef"])
    for _ in range(20000):
        texts.append(("random", "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))))
    texts.append(("long", "a" * 200 + " " + "b" * 201 + " " + "\u00e9" * 201))
    return texts


# ---------------------------------------------------------------- exchange with mgt-tests
def encode(text):
    return text.encode("utf-8", "surrogatepass")  # lone surrogates survive as in mgt's readers


def run_mgt(mgt_tests, texts):
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "texts.bin"), os.path.join(tmp, "ids.bin")
        with open(inp, "wb") as f:
            for _, text in texts:
                data = encode(text)
                f.write(struct.pack("<I", len(data)) + data)
        env = dict(os.environ, MGT_BERT_REFERENCE_INPUT=inp, MGT_BERT_REFERENCE_OUTPUT=out)
        subprocess.run([mgt_tests, "[.bert-reference]"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        results = {}
        with open(out, "rb") as f:
            data = f.read()
        pos = 0
        for variant, _, _ in VARIANTS:
            rows = []
            for _ in texts:
                (n,) = struct.unpack_from("<I", data, pos)
                rows.append(list(struct.unpack_from("<%di" % n, data, pos + 4)))
                pos += 4 + 4 * n
            results[variant] = rows
        return results


def report(title, texts, got, want, limit=5):
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    by_source = {}
    for i in bad:
        by_source[texts[i][0]] = by_source.get(texts[i][0], 0) + 1
    print("%s: %d of %d texts differ %s" % (title, len(bad), len(texts), by_source or ""))
    for i in bad[:limit]:
        print("   %s %r\n     got  %s\n     want %s" % (texts[i][0], texts[i][1][:120],
                                                    got[i][:40], want[i][:40]))
    return len(bad)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mgt-tests", help="mgt-tests binary (omit to check the reference only)")
    parser.add_argument("--datasets", default=os.path.join(REPO, "datasets"))
    parser.add_argument("--hf", action="store_true", help="also compare transformers' tokenizer")
    parser.add_argument("--megatron-path", help="a Megatron-LM checkout to compare with")
    parser.add_argument("--no-synthetic", action="store_true", help="bundled texts only")
    args = parser.parse_args()

    texts = bundled_texts(args.datasets)
    if not args.no_synthetic:
        texts += synthetic_texts()
    print("%d texts (%d bundled); Python %s, Unicode %s" % (
        len(texts), sum(1 for s, _ in texts if s not in ("sweep", "random", "long")),
        sys.version.split()[0], unicodedata.unidata_version))

    failures = 0
    mgt = run_mgt(args.mgt_tests, texts) if args.mgt_tests else None
    for variant, vocab_name, lower in VARIANTS:
        vocab_path = os.path.join(args.datasets, vocab_name)
        vocab = load_vocab(vocab_path)
        want = [reference_ids(t, vocab, lower) for _, t in texts]
        if variant == "uncased":
            with open(os.path.join(args.datasets, "tokenizer-tests", "ggml-vocab-bert-bge.out")) as f:
                expected = [[int(x) for x in line.split()] for line in f.read().split("\n")[:-1]]
            n = len(expected)
            failures += report("reference vs ggml-vocab-bert-bge.out", texts[:n], want[:n], expected)
        if mgt:
            failures += report("mgt %s vs reference" % variant, texts, mgt[variant], want)
        if args.megatron_path:
            sys.path.insert(0, args.megatron_path)
            try:
                from megatron.training.tokenizer.bert_tokenization import FullTokenizer
            except ImportError:
                from megatron.tokenizer.bert_tokenization import FullTokenizer
            full = FullTokenizer(vocab_path, do_lower_case=lower)
            meg = [full.convert_tokens_to_ids(full.tokenize(t)) for _, t in texts]
            failures += report("Megatron %s vs reference" % variant, texts, meg, want)
        if args.hf:
            from transformers import BertTokenizerLegacy
            hf = BertTokenizerLegacy(vocab_path, do_lower_case=lower, tokenize_chinese_chars=True,
                                     strip_accents=None)
            got = [hf.convert_tokens_to_ids(hf.tokenize(t)) for _, t in texts]
            report("transformers %s (as shipped) vs reference" % variant, texts, got, want)
            hf.wordpiece_tokenizer.max_input_chars_per_word = 200
            got = [hf.convert_tokens_to_ids(hf.tokenize(t)) for _, t in texts]
            report("transformers %s (200-char words) vs reference" % variant, texts, got, want)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
