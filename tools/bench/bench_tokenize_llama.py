#!/usr/bin/env python3
"""Tokenization throughput with Llama-family tokenizers: mgt-tokenize beside the Python peers.

The tokenizer files under datasets/tokenizer-tests/ are small test vocabularies (700-1,200
entries), so this script first trains realistic ones from the bundled corpora into a temporary
directory (or --models DIR, reused when already there):

  hf-llama3-32k/tokenizer.json  32,000-entry byte-level BPE with Llama 3's pre-tokenizer (Split on
                                Llama 3's regex, then ByteLevel), ignore_merges and a template
                                that prepends <|begin_of_text|>, trained by the tokenizers trainer
  spm-llama-32k.model           32,000-piece SentencePiece BPE as Llama 2's (byte fallback, split
                                digits, identity normalizer), trained by SentencePieceTrainer
  tiktoken-32k.json             the 32k BPE's ranks in Megatron's JSON format, for TikTokenizer
                                with Megatron's PATTERN_TIKTOKEN (v1) and PATTERN_TIKTOKEN_V2
  spm-unigram-32k.model         SentencePiece unigram model of up to 32,000 pieces (as many as the
                                corpus supports) with the trainer's defaults (nmt_nfkc
                                normalizer), as spm_train makes by default

Then, for each tokenizer, it runs mgt-tokenize with one worker on a JSON-lines corpus (the two
bundled corpora repeated to --megabytes), and its peer on the same documents, one thread, the
way preprocess_data.py uses a tokenizer (json.loads per line, then encode):

  HuggingFaceTokenizer     tokenizers.Tokenizer.from_file(...).encode_batch (RAYON_NUM_THREADS=1)
  Llama2Tokenizer          sentencepiece.SentencePieceProcessor.encode, BOS first
  GPTSentencePieceTokenizer sentencepiece.SentencePieceProcessor.encode (the unigram model)
  TikTokenizer             tiktoken.Encoding.encode_ordinary

Every document's ids from mgt's .bin/.idx are compared with the peer's (mismatched documents are
counted). Reported: MB of JSON input per second of wall time and per CPU second (user + system,
which is the per-core figure), and the ratio of mgt's to the peer's.

Requirements: pip install tokenizers sentencepiece tiktoken
Usage: tools/bench/bench_tokenize_llama.py [--build build] [--megabytes 30] [--models DIR]
       [--only hf spm spm-unigram tiktoken-v1 tiktoken-v2]
"""
import argparse
import array
import base64
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

# One thread for the Rust peer; must be set before tokenizers starts its thread pool.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets")
CORPORA = ("corpus-gutenberg.jsonl", "corpus-tinyshakespeare.jsonl")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# megatron/training/tokenizer/tokenizer.py PATTERN_TIKTOKEN and PATTERN_TIKTOKEN_V2.
PATTERN_TIKTOKEN = r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
PATTERN_TIKTOKEN_V2 = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
                       "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
                       "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
VOCAB = 32000
TIKTOKEN_SPECIAL = 1000  # --tiktoken-num-special-tokens default


def corpus_texts():
    texts = []
    for name in CORPORA:
        with open(os.path.join(DATA, name), encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f]
    return texts


def make_corpus(path, megabytes):
    src = b"".join(open(os.path.join(DATA, name), "rb").read() for name in CORPORA)
    with open(path, "wb") as out:
        written = 0
        while written < megabytes * 1e6:
            out.write(src)
            written += len(src)
    return os.path.getsize(path)


# ---------------------------------------------------------------------------------------------
# models


def train_models(out):
    hf_dir = os.path.join(out, "hf-llama3-32k")
    spm_path = os.path.join(out, "spm-llama-32k.model")
    tik_path = os.path.join(out, "tiktoken-32k.json")
    unigram_path = os.path.join(out, "spm-unigram-32k.model")
    if not os.path.exists(unigram_path):
        import sentencepiece as spm
        start = time.perf_counter()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus_texts()), model_prefix=unigram_path[:-len(".model")],
                                       vocab_size=VOCAB, hard_vocab_limit=False, model_type="unigram",
                                       max_sentence_length=1 << 20, num_threads=os.cpu_count(), minloglevel=2)
        pieces = spm.SentencePieceProcessor(model_file=unigram_path).get_piece_size()
        print(f"trained {unigram_path}: {pieces} pieces in {time.perf_counter() - start:.0f} s")
    if all(os.path.exists(p) for p in (os.path.join(hf_dir, "tokenizer.json"), spm_path, tik_path)):
        return hf_dir, spm_path, tik_path, unigram_path
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    os.makedirs(hf_dir, exist_ok=True)
    texts = corpus_texts()

    start = time.perf_counter()
    special = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(6)]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])])
    tok.save(os.path.join(hf_dir, "tokenizer.json"))
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                   "eos_token": "<|end_of_text|>", "clean_up_tokenization_spaces": False,
                   "model_max_length": 131072}, f)
    print(f"trained {hf_dir}: {tok.get_vocab_size()} entries in {time.perf_counter() - start:.0f} s")

    # TikToken ranks: the 256 bytes, then the BPE's merged tokens in merge order.
    data = json.loads(tok.to_str())
    byte_of = gpt2_alphabet_inverse()
    ranks = [bytes([b]) for b in range(256)]
    seen = set(ranks)
    for m in data["model"]["merges"]:
        left, right = m.split(" ") if isinstance(m, str) else m
        b = bytes(byte_of[c] for c in left + right)
        if b not in seen:
            seen.add(b)
            ranks.append(b)
    with open(tik_path, "w", encoding="utf-8") as f:
        json.dump([{"rank": i, "token_bytes": base64.b64encode(b).decode("ascii"),
                    "token_str": b.decode("utf-8", errors="replace")} for i, b in enumerate(ranks)], f)

    start = time.perf_counter()
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=spm_path[:-len(".model")],
                                   vocab_size=VOCAB, model_type="bpe", byte_fallback=True, split_digits=True,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   allow_whitespace_only_pieces=True, character_coverage=0.99995,
                                   max_sentence_length=1 << 20, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   num_threads=os.cpu_count(), minloglevel=2)
    print(f"trained {spm_path}: {VOCAB} pieces in {time.perf_counter() - start:.0f} s")
    return hf_dir, spm_path, tik_path, unigram_path


def gpt2_alphabet_inverse():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


# ---------------------------------------------------------------------------------------------
# peers


def hf_peer(hf_dir):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    return lambda texts: [e.ids for e in tok.encode_batch(texts)]


def spm_peer(path):
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=path)
    bos = sp.bos_id()
    # _Llama2Tokenizer.tokenize(text, bos=True): [bos] + encode(text).
    return lambda texts: [[bos] + ids for ids in sp.encode(texts, num_threads=1)]


def spm_plain_peer(path):
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=path)
    # _GPTSentencePieceTokenizer.tokenize: encode_as_ids.
    return lambda texts: sp.encode(texts, num_threads=1)


def tiktoken_peer(path, pattern):
    import tiktoken
    entries = json.load(open(path, encoding="utf-8"))
    ranks = {base64.b64decode(x["token_bytes"]): x["rank"] + TIKTOKEN_SPECIAL for x in entries}
    special = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>"] + [f"<SPECIAL_{i}>" for i in range(3, TIKTOKEN_SPECIAL)])}
    enc = tiktoken.Encoding(name="bench", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
    return lambda texts: [enc.encode_ordinary(t) for t in texts]


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_peer(encode, corpus):
    """json.loads per line, then encode in batches of 1024; the ids are kept for the check."""
    ids = []
    start, cpu = time.perf_counter(), cpu_seconds()
    with open(corpus, encoding="utf-8") as f:
        batch = []
        for line in f:
            batch.append(json.loads(line)["text"])
            if len(batch) == 1024:
                ids += encode(batch)
                batch = []
        if batch:
            ids += encode(batch)
    return time.perf_counter() - start, cpu_seconds() - cpu, ids


# ---------------------------------------------------------------------------------------------
# mgt


def run_mgt(build, corpus, out_prefix, flags):
    cmd = [os.path.join(build, "bin", "mgt-tokenize"), "--input", corpus, "--output-prefix", out_prefix,
           "--append-eod", "--workers", "1", "--log-interval", "100000000"] + flags
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"mgt-tokenize failed ({code}): {' '.join(cmd)}\n{proc.stderr.read().decode()}")
    return seconds, usage.ru_utime + usage.ru_stime, " ".join(cmd)


DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}


def read_documents(prefix):
    """Each document's ids from Megatron's .idx/.bin (one sequence per document here)."""
    with open(prefix + ".idx", "rb") as f:
        if f.read(9) != b"MMIDIDX\x00\x00":
            raise SystemExit(f"{prefix}.idx: not an MMIDIDX file")
        _version, code, seqs, _docs = struct.unpack("<QBQQ", f.read(25))
        sizes = array.array("i")
        sizes.fromfile(f, seqs)
    ids = array.array(DTYPES[code])
    with open(prefix + ".bin", "rb") as f:
        ids.frombytes(f.read())
    docs, pos = [], 0
    for n in sizes:
        docs.append(ids[pos:pos + n])
        pos += n
    return docs


def compare(mgt_docs, peer_ids, eod):
    """Mismatched documents; mgt's documents end with the end-of-document id (--append-eod)."""
    if len(mgt_docs) != len(peer_ids):
        return max(len(mgt_docs), len(peer_ids))
    bad = 0
    for m, p in zip(mgt_docs, peer_ids):
        expected = list(p) + [eod] if p else []
        if m.tolist() != expected:
            bad += 1
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--megabytes", type=float, default=30)
    ap.add_argument("--models", help="directory for the trained tokenizers (reused when present)")
    ap.add_argument("--only", nargs="+", choices=["hf", "spm", "spm-unigram", "tiktoken-v1", "tiktoken-v2"],
                    default=["hf", "spm", "spm-unigram", "tiktoken-v1", "tiktoken-v2"])
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        hf_dir, spm_path, tik_path, unigram_path = train_models(args.models or os.path.join(tmp, "models"))
        corpus = os.path.join(tmp, "corpus.jsonl")
        size = make_corpus(corpus, args.megabytes)
        print(f"corpus: {size / 1e6:.1f} MB of JSON lines ({' + '.join(CORPORA)} repeated)")
        with open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8") as f:
            hf_eod = next(t["id"] for t in json.load(f)["added_tokens"] if t["content"] == "<|end_of_text|>")
        import sentencepiece
        spm_eod = sentencepiece.SentencePieceProcessor(model_file=spm_path).eos_id()
        unigram_eod = sentencepiece.SentencePieceProcessor(model_file=unigram_path).eos_id()
        tik_vocab = TIKTOKEN_SPECIAL + len(json.load(open(tik_path, encoding="utf-8")))

        cases = {
            "hf": ("HuggingFaceTokenizer (Llama 3-style 32k byte-level BPE)", "HF tokenizers",
                   ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", hf_dir],
                   lambda: hf_peer(hf_dir), hf_eod),
            "spm": ("Llama2Tokenizer (32k SentencePiece BPE)", "sentencepiece",
                    ["--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", spm_path],
                    lambda: spm_peer(spm_path), spm_eod),
            "spm-unigram": ("GPTSentencePieceTokenizer (SentencePiece unigram, nmt_nfkc)", "sentencepiece",
                            ["--tokenizer-type", "GPTSentencePieceTokenizer", "--tokenizer-model", unigram_path],
                            lambda: spm_plain_peer(unigram_path), unigram_eod),
            "tiktoken-v1": ("TikTokenizer (32k ranks, pattern v1)", "tiktoken",
                            ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", tik_path,
                             "--tiktoken-pattern", "v1", "--vocab-size", str(tik_vocab)],
                            lambda: tiktoken_peer(tik_path, PATTERN_TIKTOKEN), 2),
            "tiktoken-v2": ("TikTokenizer (32k ranks, pattern v2)", "tiktoken",
                            ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", tik_path,
                             "--tiktoken-pattern", "v2", "--vocab-size", str(tik_vocab)],
                            lambda: tiktoken_peer(tik_path, PATTERN_TIKTOKEN_V2), 2),
        }
        rows = []
        for key in args.only:
            title, peer_name, flags, make_peer, eod = cases[key]
            prefix = os.path.join(tmp, key)
            m_wall, m_cpu, cmd = run_mgt(args.build, corpus, prefix, flags)
            p_wall, p_cpu, peer_ids = time_peer(make_peer(), corpus)
            docs = read_documents(prefix + "_text_document")
            bad = compare(docs, peer_ids, eod)
            tokens = sum(len(p) for p in peer_ids)
            del peer_ids, docs
            r = {"tokenizer": title, "peer": peer_name, "tokens": tokens, "documents_differing": bad,
                 "mgt_mb_s": size / m_wall / 1e6, "mgt_mb_cpu_s": size / m_cpu / 1e6,
                 "peer_mb_s": size / p_wall / 1e6, "peer_mb_cpu_s": size / p_cpu / 1e6}
            r["ratio_wall"] = r["mgt_mb_s"] / r["peer_mb_s"]
            r["ratio_cpu"] = r["mgt_mb_cpu_s"] / r["peer_mb_cpu_s"]
            rows.append(r)
            print(f"{title}: {cmd}")
            print(f"  mgt-tokenize --workers 1: {m_wall:.2f} s wall, {m_cpu:.2f} s CPU, "
                  f"{r['mgt_mb_s']:.1f} MB/s, {r['mgt_mb_cpu_s']:.1f} MB per CPU-s")
            print(f"  {peer_name} (1 thread): {p_wall:.2f} s wall, {p_cpu:.2f} s CPU, "
                  f"{r['peer_mb_s']:.1f} MB/s, {r['peer_mb_cpu_s']:.1f} MB per CPU-s")
            print(f"  mgt is {r['ratio_wall']:.1f}x (wall), {r['ratio_cpu']:.1f}x (per CPU-s); "
                  f"{tokens} tokens, {bad} documents with different ids", flush=True)
        print(json.dumps(rows))


if __name__ == "__main__":
    sys.exit(main())
