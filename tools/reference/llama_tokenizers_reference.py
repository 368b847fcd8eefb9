#!/usr/bin/env python3
"""Small tokenizer models and golden ids for mgt's HuggingFaceTokenizer, SentencePiece and
TikToken tokenizers, made with the libraries Megatron-LM calls.

Commands:
  models OUTDIR   train the small models on the bundled corpora and write them to OUTDIR
                  (datasets/tokenizer-tests/): three tokenizer.json directories (GPT-2-style
                  byte-level BPE, Llama 3-style Split + ByteLevel, Qwen2-style NFC + Split),
                  two SentencePiece models (unigram, Llama-style BPE with byte fallback), a
                  TikToken vocabulary in Megatron's JSON format, and three tokenizer.json
                  directories converted from the SentencePiece BPE model the way transformers'
                  LlamaConverter converts Llama 2's (Prepend + Replace normalizer; Metaspace
                  pre-tokenizer; Metaspace splitting on every space).
  llama2 OUTDIR   only the last three (the SentencePiece model must be in OUTDIR already).
  golden MODELDIR OUTDIR [NAME...]
                  write one JSONL golden file per Megatron tokenizer type to OUTDIR
                  (tests/tokenizer/golden/): a header line with the tokenizer's properties, then
                  {"text", "ids"} lines for the bundled text lines and the Unicode stress inputs.
                  With NAMEs, only those files (hf-llama2-bpe, ...).

The ids are what Megatron-LM's tokenizer classes (megatron/training/tokenizer/tokenizer.py)
return: _HuggingFaceTokenizer is AutoTokenizer(text).input_ids; _SentencePieceTokenizer splits
out its special tokens and encodes the rest with SentencePiece; _GPTSentencePieceTokenizer is
encode_as_ids; _Llama2Tokenizer prepends BOS; CustomTikTokenizer is tiktoken's encode_ordinary
with the special ids first. Megatron's classes are restated here (the package is not needed).

Requirements: pip install tokenizers transformers sentencepiece tiktoken protobuf
Regenerate with:
  python3 tools/reference/llama_tokenizers_reference.py models datasets/tokenizer-tests
  python3 tools/reference/llama_tokenizers_reference.py golden datasets/tokenizer-tests tests/tokenizer/golden
The Llama 2-style directories alone (they were added later):
  python3 tools/reference/llama_tokenizers_reference.py llama2 datasets/tokenizer-tests
  python3 tools/reference/llama_tokenizers_reference.py golden datasets/tokenizer-tests tests/tokenizer/golden \
      hf-llama2-bpe hf-llama2-metaspace hf-metaspace-split
"""
import base64
import io
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# megatron/training/tokenizer/tokenizer.py PATTERN_TIKTOKEN and PATTERN_TIKTOKEN_V2.
PATTERN_TIKTOKEN = r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
PATTERN_TIKTOKEN_V2 = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
                       "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
                       "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")

# Inputs that stress pre-tokenizers and normalizers, beside the bundled text lines.
STRESS = [
    "", " ", "  ", "\t", "\n", "\n\n\n", " \n ", "\r\n", "a\r\nb", "\t\tx", "   leading", "trailing   ",
    "Hello world", " Hello world", "Hello  world", "Hello   \n  world\n\n", "x \u00a0 y\u3000z\u2028w",
    "don't DON'T we'll I'M you're they've she'd it's O'Neil ''s 's", "'S'T'RE'VE'M'LL'D 'x",
    "1 12 123 1234 12345 3.14159 1,000,000 ٣٤٥ ²³ ⅷ 𝟘𝟙𝟚",
    "CamelCaseWord HTTPServer iPhone XMLHttpRequest ÀÉÎõü Straße ǅungla",
    "naïve café résumé – e\u0301 a\u0308 n\u0303 o\u0302\u0323 (combining marks)",
    "Ｆｕｌｌｗｉｄｔｈ ﬁ ﬂ ① ㎏ Ⅻ ½",
    "emoji 😀👍🏽👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✈︎ 🏳️‍🌈",
    "中文测试：你好，世界！日本語のテキスト、カタカナ。한국어 텍스트입니다.",
    "עברית: שלום עולם. العربية: مرحبا بالعالم ١٢٣. فارسی",
    "ไทย ภาษาไทย ខ្មែរ देवनागरी हिन्दी বাংলা தமிழ்",
    "Ελληνικά Кириллица Русский текст ЁЖИК",
    "code: def f(x):\n    return x**2  # comment\n\tif a != b: pass",
    "<|endoftext|> literal <|endoftext|><|endoftext|>x<|endoftext|>",
    "<|begin_of_text|>hi<|end_of_text|> <|im_start|>user\nhey<|im_end|>",
    "<s> <unk> </s> <CLS><SEP><EOD><MASK> <pad> x<s>y",
    "!!!??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} /// \\\\\\ |||",
    "a/b/c path/to/file.txt http://example.com/x?y=1&z=2 user@mail.org",
    "\u200b\u200c\u200d\ufeff zero width \u00ad soft hyphen \u0000 nul \u0007 bell \u001f unit",
    "\U0001d400\U0001d401 math bold \U00020000 ext-B \U000e0041 tag",
    "x" * 300,
    "ab" * 100 + " " + "9" * 40,
    " ".join(["word"] * 50),
    "The quick brown fox jumps over the lazy dog. " * 3,
    "MiXeD cAsE 123abc abc123 a1b2c3 ___init___ x__y",
    "     \n\n\t \t   end",
    "case folding: 'ſ 'Ll 'VE 'Re x'D y'M",
    "breaks: a\u0085b c\x0bd e\x0cf \u00a0\n \u2029 g",
]


def corpus_lines(count):
    lines = []
    for name in ("corpus-gutenberg.jsonl", "corpus-tinyshakespeare.jsonl"):
        with open(os.path.join(REPO, "datasets", name), encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= count:
                    break
                lines.append(json.loads(line)["text"])
    return lines


def ggml_inputs():
    # llama.cpp's tokenizer test strings (datasets/tokenizer-tests/ggml-vocab-gpt-2.inp).
    with open(os.path.join(REPO, "datasets", "tokenizer-tests", "ggml-vocab-gpt-2.inp"), encoding="utf-8") as f:
        return f.read().split("\n__ggml_vocab_test__\n")[:-1]


def test_texts():
    texts = []
    for t in STRESS + ggml_inputs() + corpus_lines(12):
        if t not in texts:
            texts.append(t)
    return texts


def training_text():
    out = []
    for name in ("corpus-gutenberg.jsonl", "corpus-tinyshakespeare.jsonl"):
        with open(os.path.join(REPO, "datasets", name), encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i % 4 == 0:
                    out.append(json.loads(line)["text"])
    # A little of everything else, so that non-Latin pieces and digits get merges too.
    out += STRESS * 3
    return out


# ---------------------------------------------------------------------------------------------
# models


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def train_bpe(pre_tokenizer, normalizer, special, vocab_size, ignore_merges=False):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), trainer)
    return tok


def save_hf(tok, directory, config, merges_as_strings=False):
    os.makedirs(directory, exist_ok=True)
    data = json.loads(tok.to_str())
    if merges_as_strings:
        # The older "a b" form of merges, which tokenizers still reads.
        data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    write_json(os.path.join(directory, "tokenizer.json"), data)
    write_json(os.path.join(directory, "tokenizer_config.json"), config)


def make_models(out):
    from tokenizers import Regex, normalizers, pre_tokenizers, processors
    os.makedirs(out, exist_ok=True)

    # GPT-2 style: ByteLevel pre-tokenizer with its own regex; one special token, one added
    # non-special token; merges saved in the "a b" form.
    tok = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), None, ["<|endoftext|>"], 800)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    from tokenizers import AddedToken
    tok.add_tokens([AddedToken(" mgt-added", normalized=False)])
    save_hf(tok, os.path.join(out, "hf-gpt2-bpe"),
            {"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>",
             "unk_token": "<|endoftext|>", "add_prefix_space": False, "clean_up_tokenization_spaces": False,
             "model_max_length": 1024}, merges_as_strings=True)

    # Llama 3 style: Split on the Llama 3 pattern then ByteLevel without its regex, ignore_merges,
    # a template that prepends <|begin_of_text|>, reserved special tokens.
    special = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(4)]
    tok = train_bpe(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
        None, special, 900, ignore_merges=True)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])])
    save_hf(tok, os.path.join(out, "hf-llama3-bpe"),
            {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
             "eos_token": "<|end_of_text|>", "clean_up_tokenization_spaces": False,
             "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 131072})

    # Qwen2 style: NFC normalizer, Split on the Qwen2 pattern (single digits), ByteLevel;
    # special tokens appended after the model vocabulary; merges in the array form.
    tok = train_bpe(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
        normalizers.NFC(), [], 700)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    save_hf(tok, os.path.join(out, "hf-qwen2-bpe"),
            {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
             "pad_token": "<|endoftext|>", "unk_token": None, "clean_up_tokenization_spaces": False,
             "model_max_length": 32768})

    # SentencePiece: a unigram model with the default nmt_nfkc normalizer and a pad piece, and a
    # Llama-style BPE model (byte fallback, split digits, identity normalizer).
    import sentencepiece as spm
    text = training_text()
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf, vocab_size=1000,
                                   model_type="unigram", pad_id=3, character_coverage=0.9995,
                                   num_threads=1, minloglevel=2)
    with open(os.path.join(out, "spm-unigram.model"), "wb") as f:
        f.write(buf.getvalue())
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf, vocab_size=1200,
                                   model_type="bpe", byte_fallback=True, split_digits=True,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   allow_whitespace_only_pieces=True, character_coverage=0.9995,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    with open(os.path.join(out, "spm-llama-bpe.model"), "wb") as f:
        f.write(buf.getvalue())

    # TikToken ranks in Megatron's JSON format (reload_mergeable_ranks): the 256 bytes, then the
    # GPT-2-style model's merged tokens in merge order.
    data = json.loads(open(os.path.join(out, "hf-gpt2-bpe", "tokenizer.json"), encoding="utf-8").read())
    byte_of = gpt2_alphabet_inverse()
    ranks = [bytes([b]) for b in range(256)]
    for m in data["model"]["merges"]:
        left, right = m.split(" ") if isinstance(m, str) else m
        ranks.append(bytes(byte_of[c] for c in left + right))
    entries = [{"rank": i, "token_bytes": base64.b64encode(b).decode("ascii"),
                "token_str": b.decode("utf-8", errors="replace")} for i, b in enumerate(ranks)]
    with open(os.path.join(out, "tiktoken-bpe.json"), "w", encoding="utf-8") as f:
        json.dump(entries, f, ensure_ascii=False)
        f.write("\n")

    make_llama2(out)


def make_llama2(out):
    """Llama 2-style tokenizer.json files: the SentencePiece BPE model (byte fallback) converted
    as transformers' LlamaConverter (convert_slow_tokenizer.py) converts Llama 2's tokenizer.model,
    restated here because its BPE branch does not run in transformers 5. The vocabulary and merges
    come from transformers' SentencePieceExtractor; <unk> <s> </s> are special added tokens; the
    template prepends <s> as LlamaTokenizerFast's does.

      hf-llama2-bpe        legacy=True: normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer
      hf-llama2-metaspace  legacy=False: Metaspace pre-tokenizer, prepend_scheme "first", no split
      hf-metaspace-split   Metaspace with prepend_scheme "always" and split on every "▁", and the
                           Metaspace decoder (the form older tokenizers versions wrote)
    """
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    from transformers.convert_slow_tokenizer import SentencePieceExtractor
    extracted = SentencePieceExtractor(os.path.join(out, "spm-llama-bpe.model")).extract(BPE)
    vocab, merges = extracted["vocab"], extracted["merges"]
    byte_fallback_decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                               decoders.Strip(content=" ", left=1)])
    variants = [
        ("hf-llama2-bpe", normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]), None,
         byte_fallback_decoder),
        ("hf-llama2-metaspace", None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
         byte_fallback_decoder),
        ("hf-metaspace-split", None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
         decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="always")])),
    ]
    for name, normalizer, pre_tokenizer, decoder in variants:
        tok = Tokenizer(BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True, dropout=None))
        tok.add_tokens([AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
        if normalizer:
            tok.normalizer = normalizer
        if pre_tokenizer:
            tok.pre_tokenizer = pre_tokenizer
        tok.decoder = decoder
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
        # PreTrainedTokenizerFast: transformers runs tokenizer.json as it is (its LlamaTokenizer
        # class would rebuild the pipeline from its own legacy setting).
        save_hf(tok, os.path.join(out, name),
                {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                 "unk_token": "<unk>", "clean_up_tokenization_spaces": False, "model_max_length": 4096})


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
# Megatron's tokenizer classes, restated


class SentencePieceMegatron:
    """_SentencePieceTokenizer, _GPTSentencePieceTokenizer and _Llama2Tokenizer."""

    def __init__(self, path, kind, vocab_extra_ids=0):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        self.kind = kind
        self.vocab = {self.sp.id_to_piece(i): i for i in range(len(self.sp))}
        if kind != "SentencePieceTokenizer":
            self.eod = self.sp.eos_id()
            self.bos = self.sp.bos_id()
            self.pad = self.sp.pad_id()
            return
        self.special = {}

        def add(t):
            if t not in self.vocab:
                self.vocab[t] = len(self.vocab)
            self.special[t] = self.vocab[t]

        for t in ("<CLS>", "<SEP>", "<EOD>", "<MASK>"):
            add(t)
        self.eod = self.vocab["<EOD>"]
        names = []
        for pid, default in ((self.sp.pad_id(), "<PAD>"), (self.sp.bos_id(), "<BOS>"), (self.sp.eos_id(), "<EOS>")):
            try:
                t = self.sp.id_to_piece(pid)
            except IndexError:
                t = default
            add(t)
            names.append(t)
        self.pad, self.bos = self.vocab[names[0]], self.vocab[names[1]]
        for i in range(vocab_extra_ids):
            add(f"<extra_id_{i}>")

    def vocab_size(self):
        return len(self.vocab)

    def tokenize(self, text):
        if self.kind == "GPTSentencePieceTokenizer":
            return self.sp.encode_as_ids(text)
        if self.kind == "Llama2Tokenizer":
            return [self.sp.bos_id()] + self.sp.encode(text)
        ids, idx = [], 0
        while True:
            indices = {}
            for token in self.special:
                try:
                    indices[token] = text[idx:].index(token)
                except ValueError:
                    continue
            if not indices:
                break
            nxt = min(indices, key=indices.get)
            nidx = idx + indices[nxt]
            ids.extend(self.sp.encode_as_ids(text[idx:nidx]))
            ids.append(self.special[nxt])
            idx = nidx + len(nxt)
        ids.extend(self.sp.encode_as_ids(text[idx:]))
        return ids

    def detokenize(self, ids):
        if self.kind != "SentencePieceTokenizer":
            return self.sp.decode_ids(ids)
        inv = {v: k for k, v in self.special.items()}
        text, last = "", 0
        for i, t in enumerate(ids):
            if t in inv:
                text += self.sp.decode_ids(ids[last:i]) + " " + inv[t] + " "
                last = i + 1
        return text + self.sp.decode_ids(ids[last:])


class TikTokenMegatron:
    """CustomTikTokenizer."""

    def __init__(self, path, pattern, vocab_size, num_special_tokens, special_tokens):
        import tiktoken
        default = ["<unk>", "<s>", "</s>"]
        special_tokens = special_tokens or default[:]
        special_tokens = special_tokens + [f"<SPECIAL_{i}>" for i in range(len(special_tokens), num_special_tokens)]
        entries = json.load(open(path, encoding="utf-8"))[: vocab_size - num_special_tokens]
        ranks = {base64.b64decode(x["token_bytes"]): x["rank"] + num_special_tokens for x in entries}
        special = {t: i for i, t in enumerate(special_tokens)}
        self.model = tiktoken.Encoding(name="test", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
        self.eod = special["</s>"]
        self.bos = special["<s>"]
        self.vocab_size_ = vocab_size
        assert set(range(vocab_size)) == set(ranks.values()) | set(special.values())

    def vocab_size(self):
        return self.vocab_size_

    def tokenize(self, text):
        return self.model.encode_ordinary(text)

    def detokenize(self, ids):
        return self.model.decode(ids)


class HuggingFaceMegatron:
    """_HuggingFaceTokenizer."""

    def __init__(self, path):
        import transformers
        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        self.eod = self.tok.eos_token_id
        self.bos = self.tok.bos_token_id
        self.pad = self.tok.pad_token_id

    def vocab_size(self):
        return len(self.tok)

    def tokenize(self, text):
        return self.tok(text).input_ids

    def detokenize(self, ids):
        return self.tok.decode(ids)


# ---------------------------------------------------------------------------------------------
# golden


def golden(models, out, names=()):
    import sentencepiece
    import tiktoken
    import tokenizers
    import transformers
    versions = (f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}, "
                f"sentencepiece {sentencepiece.__version__}, tiktoken {tiktoken.__version__}")
    os.makedirs(out, exist_ok=True)
    texts = test_texts()
    rel = lambda p: os.path.relpath(p, REPO)
    tik = os.path.join(models, "tiktoken-bpe.json")
    tik_size = 10 + len(json.load(open(tik, encoding="utf-8")))
    cases = [
        ("hf-gpt2-bpe", "HuggingFaceTokenizer", os.path.join(models, "hf-gpt2-bpe"), {},
         lambda p: HuggingFaceMegatron(p)),
        ("hf-llama3-bpe", "HuggingFaceTokenizer", os.path.join(models, "hf-llama3-bpe"), {},
         lambda p: HuggingFaceMegatron(p)),
        ("hf-qwen2-bpe", "HuggingFaceTokenizer", os.path.join(models, "hf-qwen2-bpe"), {},
         lambda p: HuggingFaceMegatron(p)),
        ("hf-llama2-bpe", "HuggingFaceTokenizer", os.path.join(models, "hf-llama2-bpe"), {},
         lambda p: HuggingFaceMegatron(p)),
        ("hf-llama2-metaspace", "HuggingFaceTokenizer", os.path.join(models, "hf-llama2-metaspace"), {},
         lambda p: HuggingFaceMegatron(p)),
        ("hf-metaspace-split", "HuggingFaceTokenizer", os.path.join(models, "hf-metaspace-split"), {},
         lambda p: HuggingFaceMegatron(p)),
        ("spm-unigram-sentencepiece", "SentencePieceTokenizer", os.path.join(models, "spm-unigram.model"), {},
         lambda p: SentencePieceMegatron(p, "SentencePieceTokenizer")),
        ("spm-unigram-gpt", "GPTSentencePieceTokenizer", os.path.join(models, "spm-unigram.model"), {},
         lambda p: SentencePieceMegatron(p, "GPTSentencePieceTokenizer")),
        ("spm-llama-bpe-llama2", "Llama2Tokenizer", os.path.join(models, "spm-llama-bpe.model"), {},
         lambda p: SentencePieceMegatron(p, "Llama2Tokenizer")),
        ("spm-llama-bpe-sentencepiece", "SentencePieceTokenizer", os.path.join(models, "spm-llama-bpe.model"),
         {"vocab_extra_ids": 2}, lambda p: SentencePieceMegatron(p, "SentencePieceTokenizer", 2)),
        ("tiktoken-v1", "TikTokenizer", tik,
         {"tiktoken_pattern": "v1", "vocab_size": tik_size, "tiktoken_num_special_tokens": 10},
         lambda p: TikTokenMegatron(p, PATTERN_TIKTOKEN, tik_size, 10, None)),
        ("tiktoken-v2", "TikTokenizer", tik,
         {"tiktoken_pattern": "v2", "vocab_size": tik_size - 100, "tiktoken_num_special_tokens": 12,
          "tiktoken_special_tokens": ["<unk>", "<s>", "</s>", "<|im_start|>"]},
         lambda p: TikTokenMegatron(p, PATTERN_TIKTOKEN_V2, tik_size - 100, 12,
                                    ["<unk>", "<s>", "</s>", "<|im_start|>"])),
    ]
    for name, kind, path, flags, make in cases:
        if names and name not in names:
            continue
        t = make(path)
        header = {
            "comment": f"{kind} ids of Megatron-LM's tokenizer class ({versions}). Regenerate with: "
                       "python3 tools/reference/llama_tokenizers_reference.py golden datasets/tokenizer-tests "
                       "tests/tokenizer/golden",
            "tokenizer_type": kind, "tokenizer_model": rel(path), "flags": flags,
            "vocab_size": t.vocab_size(), "eod": t.eod, "bos": getattr(t, "bos", None),
            "pad": getattr(t, "pad", None),
        }
        with open(os.path.join(out, name + ".jsonl"), "w", encoding="utf-8") as f:
            f.write(json.dumps(header, ensure_ascii=False) + "\n")
            for text in texts:
                ids = t.tokenize(text)
                line = {"text": text, "ids": ids}
                if len(text) < 200:
                    line["decoded"] = t.detokenize(ids)
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        print(f"{name}: {len(texts)} texts, vocab {t.vocab_size()}, eod {t.eod}", file=sys.stderr)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "models":
        make_models(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "llama2":
        make_llama2(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "golden":
        golden(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
