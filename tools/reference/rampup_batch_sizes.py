#!/usr/bin/env python3
"""Global batch sizes of Megatron's batch-size ramp-up, for tests/data/test_batch_size_rampup.cpp.

Loads megatron/core/num_microbatches_calculator.py from an installed megatron-core
(pip install megatron-core==0.13.0) and prints, for a few configurations, the global batch size
after given consumed samples, and the iterations update_train_iters (megatron/training/training.py)
gives a --train-samples run.

Usage: python3 tools/reference/rampup_batch_sizes.py
"""
import importlib.util
import pathlib

import megatron.core

path = pathlib.Path(megatron.core.__file__).parent / "num_microbatches_calculator.py"
spec = importlib.util.spec_from_file_location("num_microbatches_calculator", path)
calculator_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calculator_module)


def calculator(gbs, start, increment, samples):
    return calculator_module.RampupBatchsizeNumMicroBatchesCalculator(gbs, 1, 1, False, 1, start, increment, samples)


def train_iters(gbs, start, increment, samples, train_samples):
    # megatron/training/training.py update_train_iters, with the ramp-up's calculator.
    c = calculator(gbs, start, increment, samples)
    iterations, consumed = 0, 0
    while consumed <= samples and consumed <= train_samples:
        c.update(consumed, consistency_check=False)
        consumed += c.get_current_global_batch_size()
        iterations += 1
    if train_samples > consumed:
        iterations += (train_samples - consumed) // gbs
    return iterations


for gbs, start, increment, samples, consumed_list, train_samples in [
    (16, 4, 4, 24, [0, 7, 8, 15, 16, 23, 24, 25, 100], 100),
    (96, 32, 32, 1000, [0, 333, 334, 666, 667, 999, 1000, 1001], 5000),
    (10, 1, 3, 7, [0, 2, 3, 4, 5, 6, 7, 8], 50),
]:
    c = calculator(gbs, start, increment, samples)
    sizes = []
    for consumed in consumed_list:
        c.update(consumed, consistency_check=False)
        sizes.append((consumed, c.get_current_global_batch_size()))
    print(f"gbs {gbs} rampup {start} {increment} {samples}: {sizes}; "
          f"train_iters({train_samples}) = {train_iters(gbs, start, increment, samples, train_samples)}")
