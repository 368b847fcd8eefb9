// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU, as PyTorch computes
// it (aten/src/ATen/native/TensorFactories.cpp randperm_cpu): the identity shuffled by
// Fisher-Yates, position i swapped with i + (random() mod (n − i)), random() the next 32-bit
// output of the generator's MT19937 seeded with the seed's low 32 bits (CPUGeneratorImpl). Megatron's
// cyclic sampler orders each epoch so (megatron/training/datasets/data_samplers.py).
#pragma once
#include <cstdint>
#include <vector>

namespace mgt {

// For n below 2^32 / 20, the range PyTorch shuffles this way; larger n is an mgt::Error.
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);

}  // namespace mgt
