#!/usr/bin/env python3
"""Golden values of Megatron's --mock-data for mgt's tests (tests/data/test_mock_gpt_dataset.cpp).

Builds MockGPTDataset's train, valid and test splits exactly as pretrain_gpt.py does with
--mock-data (BlendedMegatronDatasetBuilder, no blend: mock=True, split "1,1,1", nothing cached)
for a few configurations, and writes, per configuration and split:
  - the dataset length and the MD5 of the document, sample and shuffle indices (raw bytes),
  - the first samples as GPTDataset.__getitem__ returns them: tokens, labels, loss mask,
    position ids, and the starts of attention segments read off the attention mask; in full for
    short sequences, as an MD5 otherwise.

The tokenizer only contributes eod and pad to mock data, so a stand-in MegatronTokenizer with
Megatron's _NullTokenizer semantics (eod = --vocab-size; no pad unless given) is used.

Requirements (PyPI only): pip install numpy "megatron-core==0.13.0" torch
Usage:
  python3 tools/reference/mock_dataset_reference.py --out tests/data/fixtures/mock_gpt_reference.txt

Output format (text, one record a line, '#' starts a comment line):
  config NAME SEQ_LENGTH SEED EOD PAD EOD_MASK_LOSS RESET_POSITION_IDS RESET_ATTENTION_MASK \
         TRAIN_SAMPLES VALID_SAMPLES TEST_SAMPLES
  index NAME SPLIT LENGTH NUM_EPOCHS DOCUMENT_MD5 SAMPLE_DTYPE SAMPLE_MD5 SHUFFLE_DTYPE SHUFFLE_MD5
  sample NAME SPLIT I tokens N v... labels N v... loss_mask N v... position_ids N v... \
         segment_starts N v...
  digest NAME SPLIT I MD5   (of tokens int64, labels int64, loss_mask float32, position_ids int64)
"""
import argparse
import hashlib
import logging
import sys

import numpy
import torch

from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDatasetConfig, MockGPTDataset
from megatron.core.datasets.megatron_tokenizer import MegatronTokenizer


class _NullTokenizer(MegatronTokenizer):
    """Megatron's _NullTokenizer as far as datasets see it: eod = vocab_size, optional pad."""

    def __init__(self, vocab_size, pad=None):
        super().__init__(None, vocab_size=str(vocab_size))
        self._eod = int(vocab_size)
        self._pad = pad

    def tokenize(self, text):
        raise NotImplementedError

    def detokenize(self, ids):
        raise NotImplementedError

    @property
    def vocab(self):
        return {}

    @property
    def inv_vocab(self):
        return {}

    @property
    def vocab_size(self):
        return self._eod + 1

    @property
    def eod(self):
        return self._eod

    @property
    def pad(self):
        if self._pad is None:
            raise NotImplementedError("no pad")
        return self._pad


# name, seq_length, seed, eod, pad, eod_mask_loss, reset_position_ids, reset_attention_mask,
# requested samples (train, valid, test), samples written per split, in full?
# Besides the first samples, two that cross a sequence start are written: with a small eod and
# pad, those hold eod and pad ids both at the sequence end and inside the next sequence.
CONFIGS = [
    ("plain", 32, 1234, 50256, None, False, False, False, (1000, 200, 100), 4, True),
    ("flags", 48, 5, 20, 3, True, True, True, (300, 50, 20), 3, True),
    # Two epochs of train and valid with 4096-token samples: separate final epochs.
    ("epochs", 4096, 1234, 128000, None, False, False, False, (20000, 17000, 100), 4, False),
]


def md5(array):
    return hashlib.md5(numpy.ascontiguousarray(array).tobytes()).hexdigest()


def segment_starts(mask):
    """Rows whose first visible column is the row itself; checks the mask is exactly those blocks."""
    m = (~mask[0]).numpy()  # True = may attend
    s = m.shape[0]
    starts = []
    current = 0
    for r in range(s):
        first = int(numpy.argmax(m[r]))
        if r > 0 and first == r:
            starts.append(r)
            current = r
        expected = numpy.zeros(s, dtype=bool)
        expected[current : r + 1] = True
        assert (m[r] == expected).all(), "attention mask is not block lower-triangular"
    return starts


def sample_indices(ds, count, eod, pad):
    chosen = list(range(count))
    for i in range(count, min(len(ds), 5000)):
        if len(chosen) == count + 2:
            break
        text, _ = ds._query_document_sample_shuffle_indices(i)
        if eod in text[1:-1] and (pad is None or pad in text[1:]):
            chosen.append(i)
    return chosen


def ints(name, values):
    return "%s %d %s" % (name, len(values), " ".join(str(int(v)) for v in values))


def floats(name, values):
    return "%s %d %s" % (name, len(values), " ".join(repr(float(v)) for v in values))


def build(config_row):
    name, seq, seed, eod, pad, eml, rpi, ram, sizes, _, _ = config_row
    config = GPTDatasetConfig(
        random_seed=seed,
        sequence_length=seq,
        blend=None,
        blend_per_split=None,
        split=None,
        path_to_cache=None,
        tokenizer=_NullTokenizer(eod, pad),
        reset_position_ids=rpi,
        reset_attention_mask=ram,
        eod_mask_loss=eml,
    )
    assert config.mock and config.split == "1,1,1"
    return BlendedMegatronDatasetBuilder(MockGPTDataset, list(sizes), lambda: True, config).build()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    lines = [
        "# Megatron-core %s --mock-data reference, numpy %s, torch %s."
        % (__import__("megatron.core").core.package_info.__version__, numpy.__version__,
           torch.__version__),
        "# Generated by: python3 tools/reference/mock_dataset_reference.py "
        "--out tests/data/fixtures/mock_gpt_reference.txt",
    ]
    for row in CONFIGS:
        name, seq, seed, eod, pad, eml, rpi, ram, sizes, count, full = row
        lines.append("config %s %d %d %d %d %d %d %d %d %d %d" % (
            name, seq, seed, eod, -1 if pad is None else pad, eml, rpi, ram, *sizes))
        datasets = build(row)
        for split_name, ds in zip(["train", "valid", "test"], datasets):
            epochs = ds._get_num_epochs(ds._get_num_tokens_per_epoch())
            lines.append("index %s %s %d %d %s %s %s %s %s" % (
                name, split_name, len(ds), epochs, md5(ds.document_index),
                ds.sample_index.dtype.name, md5(ds.sample_index),
                ds.shuffle_index.dtype.name, md5(ds.shuffle_index)))
            for i in sample_indices(ds, count, eod, pad):
                item = ds[i]
                tokens, labels = item["tokens"], item["labels"]
                loss_mask, position_ids = item["loss_mask"], item["position_ids"]
                assert tokens.dtype == torch.int64 and loss_mask.dtype == torch.float32
                if full:
                    lines.append(" ".join([
                        "sample", name, split_name, str(i),
                        ints("tokens", tokens.tolist()), ints("labels", labels.tolist()),
                        floats("loss_mask", loss_mask.tolist()),
                        ints("position_ids", position_ids.tolist()),
                        ints("segment_starts", segment_starts(item["attention_mask"]) if ram else []),
                    ]))
                else:
                    h = hashlib.md5()
                    for t in (tokens, labels, loss_mask, position_ids):
                        h.update(t.numpy().tobytes())
                    lines.append("digest %s %s %d %s" % (name, split_name, i, h.hexdigest()))
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d lines)" % (args.out, len(lines)), file=sys.stderr)


if __name__ == "__main__":
    main()
