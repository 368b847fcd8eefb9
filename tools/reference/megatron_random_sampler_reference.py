#!/usr/bin/env python3
"""Megatron's cyclic data loader order in plain Python, for mgt's tests
(tests/train/test_sample_order.cpp).

Written from megatron/training/datasets/data_samplers.py (MegatronPretrainingRandomSampler) and
megatron/training/training.py (cyclic_iter: the data loader iterated again whenever it ends, the
sampler keeping its consumed_samples), core_v0.13.0. torch.randperm with a generator seeded by the
epoch is reproduced from PyTorch's randperm_cpu (Fisher-Yates, position i swapped with
i + random() % (n - i)) over an MT19937 written out here (CPUGeneratorImpl's engine, seeded with
the seed's low 32 bits).

Requirements: python3 only. Usage:
  python3 tools/reference/megatron_random_sampler_reference.py IN.json OUT.json
IN.json: {"total_samples", "micro_batch_size", "data_parallel_size", "data_sharding",
          "consumed_samples", "micro_batches"}
OUT.json: {"ranks": [per data-parallel rank: [micro_batches lists of sample indices]]}
"""
import json
import sys


class MT19937:
    def __init__(self, seed):
        self.mt = [0] * 624
        self.index = 624
        self.mt[0] = seed & 0xFFFFFFFF
        for i in range(1, 624):
            self.mt[i] = (1812433253 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 30)) + i) & 0xFFFFFFFF

    def _twist(self):
        for i in range(624):
            y = (self.mt[i] & 0x80000000) | (self.mt[(i + 1) % 624] & 0x7FFFFFFF)
            self.mt[i] = self.mt[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
        self.index = 0

    def random(self):
        if self.index >= 624:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & 0xFFFFFFFF


def randperm(n, seed):
    g = MT19937(seed)
    r = list(range(n))
    for i in range(n - 1):
        z = g.random() % (n - i)
        r[i], r[z + i] = r[z + i], r[i]
    return r


class MegatronPretrainingRandomSampler:
    def __init__(self, total_samples, consumed_samples, micro_batch_size, data_parallel_rank,
                 data_parallel_size, data_sharding):
        self.total_samples = total_samples
        self.consumed_samples = consumed_samples
        self.micro_batch_size = micro_batch_size
        self.data_parallel_rank = data_parallel_rank
        self.data_parallel_size = data_parallel_size
        self.data_sharding = data_sharding
        self.micro_batch_times_data_parallel_size = self.micro_batch_size * data_parallel_size
        self.last_batch_size = self.total_samples % self.micro_batch_times_data_parallel_size

    def __iter__(self):
        active_total_samples = self.total_samples - self.last_batch_size
        self.epoch = self.consumed_samples // active_total_samples
        current_epoch_samples = self.consumed_samples % active_total_samples
        assert current_epoch_samples % self.micro_batch_times_data_parallel_size == 0
        if self.data_sharding:
            bucket_size = (self.total_samples // self.micro_batch_times_data_parallel_size) * self.micro_batch_size
            bucket_offset = current_epoch_samples // self.data_parallel_size
            start_idx = self.data_parallel_rank * bucket_size
            random_idx = randperm(bucket_size, self.epoch)
            idx_range = [start_idx + x for x in random_idx[bucket_offset:]]
        else:
            full_bucket_size = (self.total_samples // self.micro_batch_size) * self.micro_batch_size
            full_bucket_offset = current_epoch_samples
            idx_range_total = randperm(full_bucket_size, self.epoch)
            idx_range_active = idx_range_total[full_bucket_offset:]
            idx_range = idx_range_active[self.data_parallel_rank::self.data_parallel_size]
        batch = []
        for idx in idx_range:
            batch.append(idx)
            if len(batch) == self.micro_batch_size:
                self.consumed_samples += self.micro_batch_times_data_parallel_size
                yield batch
                batch = []


def cyclic_iter(sampler):
    while True:
        for x in sampler:
            yield x


def main():
    a = json.load(open(sys.argv[1]))
    ranks = []
    for rank in range(a["data_parallel_size"]):
        sampler = MegatronPretrainingRandomSampler(a["total_samples"], a["consumed_samples"], a["micro_batch_size"],
                                                   rank, a["data_parallel_size"], a["data_sharding"])
        it = cyclic_iter(sampler)
        ranks.append([next(it) for _ in range(a["micro_batches"])])
    json.dump({"ranks": ranks}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
