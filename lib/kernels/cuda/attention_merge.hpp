// Backend::attention_merge on the GPU, in fp32, with the formulas of kernels/cpu/attention_merge.hpp.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/operation_params.hpp"

namespace mgt::cuda {

void attention_merge(const float* part_out, const float* part_lse, const HeadTensor& whole, int64_t first_row,
                     int64_t part_rows, float* out, float* lse, cudaStream_t stream);

}  // namespace mgt::cuda
