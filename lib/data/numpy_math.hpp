// Floating-point reductions done the way NumPy does them, so that normalised weights and split
// bounds (which end up in cache-file hashes and sample counts) match Megatron to the last bit.
#pragma once
#include <span>
#include <vector>

namespace mgt {

// numpy.sum of a contiguous float64 array: 0.0 plus a pairwise sum (8-way unrolled blocks of
// up to 128 elements, halves split at a multiple of 8 above that).
double numpy_sum(std::span<const double> values);

// Megatron's utils.normalize: w / numpy.sum(w), element by element.
std::vector<double> numpy_normalize(std::span<const double> values);

}  // namespace mgt
