#!/usr/bin/env python3
"""Reference .bin/.idx files made the way Megatron-LM's tools/preprocess_data.py makes them, to
check mgt-tokenize against byte for byte.

What is Megatron's here:
  * the dataset writer: megatron-core's own IndexedDatasetBuilder and DType.optimal_dtype
    (pip install megatron-core==0.13.0 torch "numpy<2");
  * the per-line logic of preprocess_data.py's Encoder.encode (json.loads; a string is one
    sentence, a list is pre-split sentences; sentences without ids dropped; EOD appended to the
    last sentence of a non-empty document; empty documents kept), its reading of the input in
    text mode with universal newlines, and its --partitions N round-robin split followed by
    add_index merging.
What stands in for Megatron's tokenizers (megatron/training/tokenizer is not in the wheel):
  * GPT2BPETokenizer: Hugging Face transformers' GPT2Tokenizer built from the same vocab and
    merges files, with split_special_tokens=True so that a literal "<|endoftext|>" is ordinary
    text, as in Megatron v0.13 (checked at start-up: 27 91 437 1659 5239 91 29);
  * BertWordPieceLowerCase/Case: tools/reference/bert_tokenize_reference.py (Megatron's BERT
    algorithm written from its specification), with Megatron's [BOS]/[EOS] additions, so
    eod = [EOS].
Checked with megatron-core 0.13.0, torch 2.x (CPU is enough), numpy 1.26, transformers 5.23:
  python3 -m venv /tmp/ref && /tmp/ref/bin/pip install megatron-core==0.13.0 torch "numpy<2" transformers
  /tmp/ref/bin/python tools/reference/preprocess_reference.py compare --mgt-tokenize build/bin/mgt-tokenize
Differences from preprocess_data.py that do not change the output: one process instead of a
pool (the pool's imap keeps input order), and every key's .idx is finalized (v0.13 finalizes
only the last key's, a bug).

Commands:
  run      --input FILE --output-prefix PREFIX --tokenizer-type TYPE [--vocab-file F]
           [--merge-file F] [--json-keys K...] [--append-eod] [--partitions N]
  compare  --mgt-tokenize BUILD/bin/mgt-tokenize [--work DIR]
           runs the standard matrix (bundled corpora, with and without --append-eod, BERT,
           tests/data/fixtures/preprocess_edge_cases.jsonl with two keys, partitions, gzip and
           zstd inputs, 1 and 4 workers) through both and compares with cmp; exit 1 on any
           difference.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATASETS = os.path.join(REPO, "datasets")
LITERAL_EOD_IDS = [27, 91, 437, 1659, 5239, 91, 29]


# ------------------------------------------------------------------------------ tokenizers
class Gpt2Reference:
    def __init__(self, vocab_file, merge_file):
        from transformers import GPT2Tokenizer

        self.tok = GPT2Tokenizer(vocab=vocab_file, merges=merge_file, split_special_tokens=True)
        self.vocab_size = len(self.tok)
        self.eod = self.tok.convert_tokens_to_ids("<|endoftext|>")
        got = self.tokenize("<|endoftext|>")
        if got != LITERAL_EOD_IDS:
            raise SystemExit(f"GPT-2 reference parses special tokens: {got} != {LITERAL_EOD_IDS}")

    def tokenize(self, text):
        return self.tok(text, add_special_tokens=False)["input_ids"]


class BertReference:
    def __init__(self, vocab_file, lower_case):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bert_tokenize_reference as ref

        self.ref = ref
        self.vocab = ref.load_vocab(vocab_file)  # adds [BOS], [EOS] like Megatron's wrapper
        self.lower_case = lower_case
        self.vocab_size = len(self.vocab)
        self.eod = self.vocab["[EOS]"]

    def tokenize(self, text):
        return self.ref.reference_ids(text, self.vocab, self.lower_case)


def make_tokenizer(args):
    if args.tokenizer_type == "GPT2BPETokenizer":
        return Gpt2Reference(args.vocab_file, args.merge_file)
    if args.tokenizer_type in ("BertWordPieceLowerCase", "BertWordPieceCase"):
        return BertReference(args.vocab_file, args.tokenizer_type == "BertWordPieceLowerCase")
    raise SystemExit(f"unsupported --tokenizer-type {args.tokenizer_type}")


# ------------------------------------------------------------------------------ preprocess
class Encoder:
    """preprocess_data.py's Encoder.encode, line for line in behaviour."""

    def __init__(self, tokenizer, json_keys, append_eod):
        self.tokenizer = tokenizer
        self.json_keys = json_keys
        self.append_eod = append_eod

    def encode(self, json_line):
        data = json.loads(json_line)
        ids, lens = {}, {}
        for key in self.json_keys:
            text = data[key]
            sentences = text if isinstance(text, list) else [text]
            doc_ids, sentence_lens = [], []
            for sentence in sentences:
                sentence_ids = self.tokenizer.tokenize(sentence)
                if len(sentence_ids) > 0:
                    doc_ids.extend(sentence_ids)
                    sentence_lens.append(len(sentence_ids))
            if len(doc_ids) > 0 and self.append_eod:
                doc_ids.append(self.tokenizer.eod)
                sentence_lens[-1] += 1
            ids[key] = doc_ids
            lens[key] = sentence_lens
        return ids, lens


def encode_file(input_path, output_prefix, tokenizer, json_keys, append_eod):
    from megatron.core.datasets import indexed_dataset

    encoder = Encoder(tokenizer, json_keys, append_eod)
    dtype = indexed_dataset.DType.optimal_dtype(tokenizer.vocab_size)
    builders = {
        key: indexed_dataset.IndexedDatasetBuilder(f"{output_prefix}_{key}_document.bin", dtype=dtype)
        for key in json_keys
    }
    with open(input_path, "r", encoding="utf-8") as fin:  # text mode: universal newlines
        for line in fin:
            doc, lens = encoder.encode(line)
            for key in doc.keys():
                builders[key].add_document(doc[key], lens[key])
    for key in json_keys:
        builders[key].finalize(f"{output_prefix}_{key}_document.idx")
    return dtype


def run_reference(args):
    tokenizer = make_tokenizer(args)
    if args.partitions == 1:
        encode_file(args.input, args.output_prefix, tokenizer, args.json_keys, args.append_eod)
        return
    # preprocess_data.py with --partitions N: lines dealt round-robin into N files, each
    # encoded on its own, then concatenated with add_index in partition order.
    from megatron.core.datasets import indexed_dataset

    work = tempfile.mkdtemp(prefix="preprocess-ref-")
    try:
        parts = [open(os.path.join(work, f"part_{i}.jsonl"), "w", encoding="utf-8")
                 for i in range(args.partitions)]
        with open(args.input, "r", encoding="utf-8") as fin:
            for index, line in enumerate(fin):
                parts[index % args.partitions].write(line)
        for p in parts:
            p.close()
        dtype = None
        for i in range(args.partitions):
            dtype = encode_file(os.path.join(work, f"part_{i}.jsonl"), os.path.join(work, f"out_{i}"),
                                tokenizer, args.json_keys, args.append_eod)
        for key in args.json_keys:
            builder = indexed_dataset.IndexedDatasetBuilder(
                f"{args.output_prefix}_{key}_document.bin", dtype=dtype)
            for i in range(args.partitions):
                builder.add_index(os.path.join(work, f"out_{i}_{key}_document"))
            builder.finalize(f"{args.output_prefix}_{key}_document.idx")
    finally:
        shutil.rmtree(work)


# ------------------------------------------------------------------------------ comparison
def compare(args):
    work = args.work or tempfile.mkdtemp(prefix="preprocess-compare-")
    os.makedirs(work, exist_ok=True)
    gpt2 = ["--tokenizer-type", "GPT2BPETokenizer",
            "--vocab-file", os.path.join(DATASETS, "gpt2-vocab.json"),
            "--merge-file", os.path.join(DATASETS, "gpt2-merges.txt")]
    bert_lower = ["--tokenizer-type", "BertWordPieceLowerCase",
                  "--vocab-file", os.path.join(DATASETS, "bert-uncased-vocab.txt")]
    bert_cased = ["--tokenizer-type", "BertWordPieceCase",
                  "--vocab-file", os.path.join(DATASETS, "bert-cased-vocab.txt")]
    shakespeare = os.path.join(DATASETS, "corpus-tinyshakespeare.jsonl")
    gutenberg = os.path.join(DATASETS, "corpus-gutenberg.jsonl")
    fixture = os.path.join(REPO, "tests", "data", "fixtures", "preprocess_edge_cases.jsonl")

    shakespeare_gz = os.path.join(work, "shakespeare.jsonl.gz")
    with open(shakespeare, "rb") as fin, gzip.open(shakespeare_gz, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    gutenberg_zst = os.path.join(work, "gutenberg.jsonl.zst")
    have_zstd = shutil.which("zstd") is not None
    if have_zstd:
        subprocess.run(["zstd", "-q", "-f", gutenberg, "-o", gutenberg_zst], check=True)

    # (name, reference input, mgt input, tokenizer flags, keys, extra flags, mgt-only flags)
    cases = [
        ("shakespeare-gpt2", shakespeare, shakespeare, gpt2, ["text"], [], []),
        ("shakespeare-gpt2-eod", shakespeare, shakespeare, gpt2, ["text"], ["--append-eod"], []),
        ("gutenberg-gpt2", gutenberg, gutenberg, gpt2, ["text"], [], []),
        ("gutenberg-gpt2-eod", gutenberg, gutenberg, gpt2, ["text"], ["--append-eod"], []),
        ("shakespeare-bert-lower-eod", shakespeare, shakespeare, bert_lower, ["text"], ["--append-eod"], []),
        ("gutenberg-bert-cased", gutenberg, gutenberg, bert_cased, ["text"], [], []),
        ("fixture-gpt2-2keys", fixture, fixture, gpt2, ["text", "title"], [], []),
        ("fixture-gpt2-2keys-eod", fixture, fixture, gpt2, ["text", "title"], ["--append-eod"], []),
        ("fixture-bert-2keys-eod", fixture, fixture, bert_lower, ["text", "title"], ["--append-eod"], []),
        ("shakespeare-gpt2-1worker", shakespeare, shakespeare, gpt2, ["text"], ["--append-eod"], ["--workers", "1"]),
        ("shakespeare-gpt2-4workers", shakespeare, shakespeare, gpt2, ["text"], ["--append-eod"], ["--workers", "4"]),
        ("shakespeare-gpt2-gzip", shakespeare, shakespeare_gz, gpt2, ["text"], ["--append-eod"], []),
        ("shakespeare-gpt2-partitions3", shakespeare, shakespeare, gpt2, ["text"], ["--append-eod"],
         ["--partitions", "3"]),
    ]
    if have_zstd:
        cases.append(("gutenberg-gpt2-zstd", gutenberg, gutenberg_zst, gpt2, ["text"], [], []))

    failures = 0
    for name, ref_input, mgt_input, tok, keys, extra, mgt_only in cases:
        ref_prefix = os.path.join(work, f"ref-{name}")
        mgt_prefix = os.path.join(work, f"mgt-{name}")
        ref_args = argparse.Namespace(
            input=ref_input, output_prefix=ref_prefix, json_keys=keys,
            append_eod="--append-eod" in extra, tokenizer_type=tok[1], vocab_file=tok[3],
            merge_file=tok[5] if len(tok) > 5 else None,
            partitions=int(mgt_only[1]) if "--partitions" in mgt_only else 1)
        run_reference(ref_args)
        cmd = [args.mgt_tokenize, "--input", mgt_input, "--output-prefix", mgt_prefix,
               "--json-keys", *keys, *tok, *extra, *mgt_only, "--quiet"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        for key in keys:
            for ext in (".bin", ".idx"):
                a = f"{ref_prefix}_{key}_document{ext}"
                b = f"{mgt_prefix}_{key}_document{ext}"
                same = subprocess.run(["cmp", a, b], stdout=subprocess.DEVNULL).returncode == 0
                size = os.path.getsize(a)
                print(f"{'identical' if same else 'DIFFERENT'}  {name:32s} {key:6s} {ext}  {size} bytes")
                failures += 0 if same else 1
    print(f"{len(cases)} cases, {failures} differing files; outputs in {work}")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--input", required=True)
    run.add_argument("--output-prefix", required=True)
    run.add_argument("--json-keys", nargs="+", default=["text"])
    run.add_argument("--tokenizer-type", required=True)
    run.add_argument("--vocab-file")
    run.add_argument("--merge-file")
    run.add_argument("--append-eod", action="store_true")
    run.add_argument("--partitions", type=int, default=1)
    cmp = sub.add_parser("compare")
    cmp.add_argument("--mgt-tokenize", required=True)
    cmp.add_argument("--work")
    args = parser.parse_args()
    if args.command == "run":
        run_reference(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
