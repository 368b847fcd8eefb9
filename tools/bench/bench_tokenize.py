#!/usr/bin/env python3
"""Tokenization throughput: mgt-tokenize beside tiktoken and Hugging Face tokenizers.

All three tokenize the same JSON-lines corpus with the same GPT-2 vocabulary and merges
(datasets/), so the comparison is of implementations, not vocabularies. The corpus is the
bundled Gutenberg corpus repeated to --megabytes. Reported figure: MB of JSON input per second
(as Megatron's preprocess_data.py reports it), per worker count, and the ratio to each peer.
Peak RSS of mgt-tokenize is measured at two input sizes to show it does not grow with input.

Peers (pip install tiktoken tokenizers) are optional; missing ones are reported as such.
Usage: tools/bench/bench_tokenize.py [--build build] [--megabytes 200] [--workers 1 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")
VOCAB = os.path.join(DATA, "gpt2-vocab.json")
MERGES = os.path.join(DATA, "gpt2-merges.txt")


def make_corpus(path, megabytes):
    src = open(os.path.join(DATA, "corpus-gutenberg.jsonl"), "rb").read()
    with open(path, "wb") as out:
        written = 0
        while written < megabytes * 1e6:
            out.write(src)
            written += len(src)
    return os.path.getsize(path)


def run_mgt(build, corpus, workers, out_prefix):
    cmd = [os.path.join(build, "bin", "mgt-tokenize"), "--input", corpus, "--output-prefix",
           out_prefix, "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", VOCAB,
           "--merge-file", MERGES, "--append-eod", "--workers", str(workers),
           "--log-interval", "100000000"]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        # wait4 gives the peak RSS of this child alone.
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"mgt-tokenize failed with exit code {proc.returncode}: {' '.join(cmd)}")
        out.seek(0)
        summary = json.loads(out.read())
    peak_kb = usage.ru_maxrss
    return seconds, peak_kb, summary


def gpt2_bytes_to_unicode():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiktoken_encoder():
    import tiktoken
    byte_of = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    vocab = json.load(open(VOCAB, encoding="utf-8"))
    ranks = {bytes(byte_of[c] for c in tok): i for tok, i in vocab.items() if tok != "<|endoftext|>"}
    pat = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    enc = tiktoken.Encoding("gpt2-local", pat_str=pat, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    return lambda texts: [enc.encode_ordinary(t) for t in texts]


def hf_encoder():
    from tokenizers import ByteLevelBPETokenizer
    tok = ByteLevelBPETokenizer(VOCAB, MERGES, add_prefix_space=False, trim_offsets=False)
    return lambda texts: [e.ids for e in tok.encode_batch(texts)]


def time_peer(name, make, corpus, corpus_bytes):
    """Peer pipeline as preprocess_data.py runs it: json.loads per line, then tokenize."""
    try:
        encode = make()
    except Exception as e:  # a missing package is a result too
        return {"peer": name, "error": f"{type(e).__name__}: {e}"}
    start = time.perf_counter()
    tokens = 0
    with open(corpus, encoding="utf-8") as f:
        batch = []
        for line in f:
            batch.append(json.loads(line)["text"])
            if len(batch) == 1024:
                tokens += sum(len(ids) for ids in encode(batch))
                batch = []
        if batch:
            tokens += sum(len(ids) for ids in encode(batch))
    seconds = time.perf_counter() - start
    return {"peer": name, "seconds": seconds, "mb_per_s": corpus_bytes / seconds / 1e6,
            "tokens": tokens}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--megabytes", type=float, default=200)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--skip-peers", action="store_true", help="time mgt-tokenize alone")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        size = make_corpus(corpus, args.megabytes)
        print(f"corpus: {size / 1e6:.1f} MB of JSON lines (datasets/corpus-gutenberg.jsonl repeated)")

        results = []
        for w in args.workers:
            seconds, peak_kb, summary = run_mgt(args.build, corpus, w, os.path.join(tmp, f"w{w}"))
            results.append((w, seconds, peak_kb, summary))
            tokens = sum(o["tokens"] for o in summary["outputs"])
            print(f"mgt-tokenize --workers {w}: {seconds:.2f} s, {size / seconds / 1e6:.1f} MB/s, "
                  f"{size / seconds / 1e6 / w:.1f} MB/s per worker, peak RSS {peak_kb / 1024:.0f} MiB, "
                  f"{tokens} tokens incl. {summary['documents']} end-of-document ids")

        # Peak RSS must not grow with input size: a quarter of the corpus for comparison.
        small = os.path.join(tmp, "small.jsonl")
        small_size = make_corpus(small, args.megabytes / 4)
        w = args.workers[-1]
        _, small_peak, _ = run_mgt(args.build, small, w, os.path.join(tmp, "small"))
        print(f"peak RSS --workers {w}: {small_peak / 1024:.0f} MiB at {small_size / 1e6:.0f} MB input, "
              f"{results[-1][2] / 1024:.0f} MiB at {size / 1e6:.0f} MB input")

        mgt_single = size / results[0][1] / 1e6
        mgt_text_tokens = sum(o["tokens"] for o in results[0][3]["outputs"]) - results[0][3]["documents"]
        peers = () if args.skip_peers else (("tiktoken", tiktoken_encoder), ("hf-tokenizers", hf_encoder))
        for name, make in peers:
            if name == "hf-tokenizers":
                os.environ["RAYON_NUM_THREADS"] = "1"
            r = time_peer(name, make, corpus, size)
            if "error" in r:
                print(f"{name}: not measured ({r['error']})")
                continue
            same = "same tokens as mgt" if r["tokens"] == mgt_text_tokens else "TOKEN COUNT DIFFERS from mgt"
            print(f"{name} (1 thread, json.loads + encode): {r['seconds']:.2f} s, "
                  f"{r['mb_per_s']:.1f} MB/s, {r['tokens']} tokens ({same}); "
                  f"mgt --workers {results[0][0]} is {mgt_single / r['mb_per_s']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
