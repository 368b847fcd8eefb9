#!/usr/bin/env python3
"""Check mgt-index against the real megatron-core GPTDataset / BlendedDataset index builder.

For each scenario (single prefix, weighted blend, unweighted blend, per-split paths, the default
cache directory, ...) this script
  1. runs mgt-index with the scenario's flags into a fresh cache directory,
  2. builds the same datasets with megatron-core's BlendedMegatronDatasetBuilder and GPTDataset
     (what pretrain_gpt.py does) into another fresh cache directory,
  3. compares the two directories: the same file names (hash, class, split) and the same bytes
     (description.txt and every .npy),
  4. reads a few samples of every GPTDataset with Megatron's __getitem__ and checks them
     against the tokens those samples span according to mgt's cached indices,
  5. compares the first samples of every split as mgt's C++ reader returns them
     (mgt-index --dump-samples: tokens, labels, loss mask, position ids, blend member, document
     starts) with the items of Megatron's top-level datasets (attention mask included).
It prints one line per scenario and "N passed, M failed" at the end; exit status 1 on mismatch.

Requirements (PyPI only):
  pip install numpy "megatron-core==0.13.0" torch pybind11
megatron-core's wheel ships megatron/core/datasets/helpers_cpp as a compiled module; if it is
missing, compile it with `make -C <site-packages>/megatron/core/datasets` (needs pybind11).

Megatron's real tokenizer classes live in megatron/training (not in the wheel); the description
only needs the tokenizer's unique_identifiers, so this script defines a MegatronTokenizer
subclass named _GPT2BPETokenizer whose constructor calls super().__init__(vocab_file, merge_file)
exactly as Megatron v0.13's does.

Usage:
  python3 tools/reference/megatron_index_reference.py --mgt-index build/bin/mgt-index \\
      --prefix DIR/shak_text_document --prefix2 DIR/gut_text_document \\
      --vocab datasets/gpt2-vocab.json --merges datasets/gpt2-merges.txt --work /tmp/mgt-index-ref
The prefixes must be GPT-2 tokenized datasets written by mgt-tokenize.
"""
import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

import numpy
import torch

from megatron.core.datasets.blended_dataset import BlendedDataset
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
from megatron.core.datasets.megatron_tokenizer import MegatronTokenizer
from megatron.core.datasets.utils import get_blend_from_list


class _GPT2BPETokenizer(MegatronTokenizer):
    """Stands in for megatron/training/tokenizer/tokenizer.py's class of the same name."""

    def __init__(self, vocab_file, merge_file):
        super().__init__(vocab_file, merge_file)

    def tokenize(self, text):
        raise NotImplementedError

    @property
    def vocab(self):
        return {}

    @property
    def inv_vocab(self):
        return {}

    @property
    def vocab_size(self):
        return 50257

    @property
    def eod(self):
        return 50256


def init_single_process_group(work):
    """BlendedDataset calls torch.distributed.get_rank() when it caches: one local gloo rank."""
    if torch.distributed.is_initialized():
        return
    store = os.path.join(work, "dist-store")
    if os.path.exists(store):
        os.remove(store)
    torch.distributed.init_process_group(
        backend="gloo", init_method="file://" + store, rank=0, world_size=1
    )


def num_samples(train_iters, gbs, eval_iters, eval_interval, train_samples=None):
    """training.py get_train_valid_test_num_samples (train_iters from samples when sample-based)."""
    if train_samples:
        train = train_samples
        train_iters = train_samples // gbs
    else:
        train = train_iters * gbs
    valid = (train_iters // eval_interval + 1) * eval_iters * gbs
    test = eval_iters * gbs
    return [train, valid, test]


def megatron_build(s, cache, vocab, merges):
    """pretrain_gpt.py's dataset construction for scenario s."""
    data_path = s.get("data_path")
    per_split = s.get("per_split")
    blend = get_blend_from_list(data_path) if data_path else None
    blend_per_split = None
    split = s.get("split")
    if data_path and split is None:
        split = "969, 30, 1"  # arguments.py legacy default
    if per_split:
        blend_per_split = [get_blend_from_list(p) if p else None for p in per_split]
    config = GPTDatasetConfig(
        random_seed=s.get("seed", 1234),
        sequence_length=s["seq_length"],
        blend=blend,
        blend_per_split=blend_per_split,
        split=split,
        path_to_cache=cache,
        tokenizer=_GPT2BPETokenizer(vocab, merges),
        reset_position_ids=s.get("reset_position_ids", False),
        reset_attention_mask=s.get("reset_attention_mask", False),
        eod_mask_loss=s.get("eod_mask_loss", False),
        mid_level_dataset_surplus=0.005,
    )
    sizes = num_samples(
        s.get("train_iters"), s["gbs"], s.get("eval_iters", 100), s.get("eval_interval", 1000),
        s.get("train_samples"),
    )
    return BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()


def mgt_flags(s, vocab, merges):
    f = []
    if s.get("data_path"):
        f += ["--data-path"] + s["data_path"]
    for name, p in zip(["train", "valid", "test"], s.get("per_split") or [None] * 3):
        if p:
            f += ["--%s-data-path" % name] + p
    if s.get("split") is not None:
        f += ["--split", s["split"]]
    f += ["--seq-length", str(s["seq_length"]), "--global-batch-size", str(s["gbs"])]
    if s.get("train_samples"):
        f += ["--train-samples", str(s["train_samples"])]
    else:
        f += ["--train-iters", str(s["train_iters"])]
    for key in ["eval_iters", "eval_interval", "seed"]:
        if key in s:
            f += ["--" + key.replace("_", "-"), str(s[key])]
    f += ["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab, "--merge-file", merges]
    for key in ["eod_mask_loss", "reset_position_ids", "reset_attention_mask"]:
        if s.get(key):
            f += ["--" + key.replace("_", "-")]
    return f


def compare_dump(datasets, dump_path):
    """mgt's C++ samples (JSON lines) against Megatron's top-level dataset items."""
    import json

    problems = []
    checked = 0
    split_of = {"train": 0, "valid": 1, "test": 2}
    with open(dump_path) as f:
        for line in f:
            got = json.loads(line)
            ds = datasets[split_of[got["split"]]]
            want = ds[got["index"]]
            where = "%s sample %d" % (got["split"], got["index"])
            for key in ["tokens", "labels", "position_ids"]:
                if want[key].tolist() != got[key]:
                    problems.append("%s: %s differ" % (where, key))
            if want["loss_mask"].tolist() != got["loss_mask"]:
                problems.append("%s: loss_mask differs" % where)
            if isinstance(ds, BlendedDataset) and int(want["dataset_id"]) != got["dataset_id"]:
                problems.append("%s: dataset_id differs" % where)
            # Megatron's mask: True = masked. mgt gives the document starts instead.
            n = len(got["tokens"])
            starts = [0] + got["segment_starts"]
            allowed = numpy.zeros((n, n), dtype=bool)
            for q in range(n):
                start = max(x for x in starts if x <= q)
                allowed[q, start : q + 1] = True
            if not numpy.array_equal(want["attention_mask"][0].numpy(), ~allowed):
                problems.append("%s: attention mask differs" % where)
            checked += 1
    if checked == 0:
        problems.append("no samples dumped")
    return problems, checked


def compare_dirs(a, b):
    """Same file names, same bytes. Returns a list of problems."""
    problems = []
    fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
    if fa != fb:
        problems.append("file names differ:\n  mgt:      %s\n  megatron: %s" % (fa, fb))
    for name in sorted(set(fa) & set(fb)):
        if not filecmp.cmp(os.path.join(a, name), os.path.join(b, name), shallow=False):
            problems.append("bytes differ: " + name)
    if not fa:
        problems.append("no files")
    return problems, len(set(fa) & set(fb))


def compare_samples(datasets, mgt_cache, s):
    """Megatron's __getitem__ against the same sample re-read from mgt's cached .npy files."""
    problems = []
    checked = 0
    for ds in datasets:
        if ds is None:
            continue
        members = ds.datasets if isinstance(ds, BlendedDataset) else [ds]
        for m in members:
            base = os.path.join(
                mgt_cache, "%s-GPTDataset-%s-" % (m.unique_description_hash, m.index_split.name)
            )
            doc = numpy.load(base + "document_index.npy")
            sample = numpy.load(base + "sample_index.npy")
            shuffle = numpy.load(base + "shuffle_index.npy")
            seq = s["seq_length"]
            for i in list(range(min(5, len(m)))) + [len(m) - 1]:
                j = shuffle[i]
                (b, bo), (e, eo) = sample[j], sample[j + 1]
                parts = []
                for k in range(b, e + 1):
                    off = bo if k == b else 0
                    full = m.dataset.get(int(doc[k]))
                    end = (eo + 1) if k == e else len(full)
                    parts.append(full[off:end])
                text = numpy.concatenate(parts).astype(numpy.int64)
                if len(text) < seq + 1:
                    text = numpy.concatenate([text, numpy.full(seq + 1 - len(text), -1)])
                got = m[i]
                if not numpy.array_equal(got["tokens"].numpy(), numpy.where(text[:-1] == -1, 0, text[:-1])) or \
                        not numpy.array_equal(got["labels"].numpy(), numpy.where(text[1:] == -1, 0, text[1:])):
                    problems.append("sample %d of %s %s differs" % (i, m.dataset_path, m.index_split.name))
                checked += 1
    return problems, checked


SCENARIOS = [
    # name, flags: the small dataset over several epochs with a separate final epoch.
    dict(name="single prefix, default split", data_path=["{p1}"], seq_length=128, train_iters=100,
         gbs=32, eval_iters=10, eval_interval=50),
    dict(name="single prefix, eod loss mask, position and attention resets", data_path=["{p1}"],
         split="90,9,1", seq_length=64, train_iters=30, gbs=8, eval_iters=2, eval_interval=10,
         eod_mask_loss=True, reset_position_ids=True, reset_attention_mask=True),
    dict(name="single prefix, split 98,2,0, seed 7", data_path=["{p1}"], split="98,2,0",
         seq_length=64, train_iters=20, gbs=8, eval_iters=3, eval_interval=5, seed=7),
    dict(name="single prefix, train samples, one epoch", data_path=["{p1}"], split="90,5,5",
         seq_length=256, train_samples=500, gbs=4, eval_iters=2, eval_interval=100),
    dict(name="single prefix, many epochs, no separate epoch", data_path=["{p1}"], split="1,1,1",
         seq_length=512, train_iters=300, gbs=16, eval_iters=5, eval_interval=100),
    dict(name="weighted blend", data_path=["0.3", "{p1}", "0.7", "{p2}"], split="949,50,1",
         seq_length=128, train_iters=50, gbs=16, eval_iters=4, eval_interval=25),
    dict(name="unweighted blend", data_path=["{p1}", "{p2}"], split="949,50,1",
         seq_length=128, train_iters=50, gbs=16, eval_iters=4, eval_interval=25),
    dict(name="single weighted prefix (a blend of one)", data_path=["1", "{p2}"], split="99,1,0",
         seq_length=128, train_iters=10, gbs=8, eval_iters=2, eval_interval=5),
    dict(name="per-split paths", per_split=[["{p1}"], ["0.5", "{p1}", "0.5", "{p2}"], ["{p2}"]],
         seq_length=128, train_iters=20, gbs=8, eval_iters=2, eval_interval=10),
    dict(name="default cache directory", data_path=["{p1}"], seq_length=100, train_iters=10, gbs=8,
         eval_iters=1, eval_interval=5, default_cache=True),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mgt-index", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--prefix2", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--merges", required=True)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="mgt-index-ref-")
    os.makedirs(work, exist_ok=True)
    init_single_process_group(work)

    passed = failed = 0
    for n, s in enumerate(SCENARIOS):
        fill = lambda items: [x.format(p1=args.prefix, p2=args.prefix2) for x in items]
        s = dict(s)
        if "data_path" in s:
            s["data_path"] = fill(s["data_path"])
        if "per_split" in s:
            s["per_split"] = [fill(p) if p else None for p in s["per_split"]]
        mgt_cache = os.path.join(work, "case%d-mgt" % n)
        meg_cache = os.path.join(work, "case%d-megatron" % n)
        for d in (mgt_cache, meg_cache):
            shutil.rmtree(d, ignore_errors=True)
        flags = mgt_flags(s, args.vocab, args.merges)
        dump = os.path.join(work, "case%d-samples.jsonl" % n)
        flags += ["--dump-samples", dump, "--dump-count", "12"]
        default_dir = os.path.join(args.prefix, "cache")
        if s.get("default_cache"):
            shutil.rmtree(default_dir, ignore_errors=True)
        else:
            flags += ["--data-cache-path", mgt_cache]
        run = subprocess.run([args.mgt_index] + flags, capture_output=True, text=True)
        if run.returncode != 0:
            print("FAIL %s: mgt-index exited %d: %s" % (s["name"], run.returncode, run.stderr.strip()))
            failed += 1
            continue
        if s.get("default_cache"):
            shutil.move(os.path.join(default_dir, "GPTDataset_indices"), mgt_cache)
            shutil.rmtree(default_dir)
            datasets = megatron_build(s, None, args.vocab, args.merges)
            shutil.move(os.path.join(default_dir, "GPTDataset_indices"), meg_cache)
            shutil.rmtree(default_dir)
        else:
            datasets = megatron_build(s, meg_cache, args.vocab, args.merges)
        problems, files = compare_dirs(mgt_cache, meg_cache)
        sample_problems, samples = compare_samples(datasets, mgt_cache, s)
        problems += sample_problems
        dump_problems, dumped = compare_dump(datasets, dump)
        problems += dump_problems
        if problems:
            failed += 1
            print("FAIL %s:\n  %s" % (s["name"], "\n  ".join(problems[:10])))
        else:
            passed += 1
            print("ok   %s: %d identical files, %d + %d samples agree"
                  % (s["name"], files, samples, dumped))
    print("%d passed, %d failed" % (passed, failed))
    torch.distributed.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
