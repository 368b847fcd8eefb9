// Deterministic parameter initialisation (Megatron, transformer_config.py: weights N(0, σ),
// residual-branch output projections N(0, σ/√(2L)), biases 0, norm weights 1).
//
// Each value is a pure function of (seed, parameter name, index of the element in the global
// tensor): Philox4x32-10 with key = seed and counter = {pair index, FNV-1a hash of the name}
// gives two 64-bit uniforms, and Box-Muller turns them into the pair's two normals (cos for the
// even element, sin for the odd one). So the initial model is the same whatever order the tensors
// are visited in, however they are sharded across tensor-parallel ranks, and on any backend.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "model/parameter_table.hpp"

namespace mgt {

// 64-bit FNV-1a of the name: the Philox stream of that parameter.
uint64_t parameter_stream(std::string_view name);

// Standard normal samples 2·pair and 2·pair + 1 of stream `stream` under `seed`.
std::array<double, 2> standard_normal_pair(uint64_t seed, uint64_t stream, uint64_t pair);
// Standard normal sample number `index` of stream `stream` under `seed`.
double standard_normal(uint64_t seed, uint64_t stream, uint64_t index);
// Sample number `index` of U(-1, 1) in stream `stream` under `seed`.
double symmetric_uniform(uint64_t seed, uint64_t stream, uint64_t index);

// out[local elements of entry] = the entry's initial values on rank tp.
void initialize_parameter(const ParameterEntry& entry, const TensorParallelRank& tp, uint64_t seed,
                          std::span<float> out);
// The same for local elements [first, first + out.size()) only: any cut of the elements gives
// the values of the whole, so ranges can be filled on several threads.
void initialize_parameter_range(const ParameterEntry& entry, const TensorParallelRank& tp, uint64_t seed,
                                int64_t first, std::span<float> out);

}  // namespace mgt
