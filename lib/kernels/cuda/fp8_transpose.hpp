// The transposed copy of FP8 codes cast elsewhere (Backend::fp8_transpose): a weight all-gathered
// in FP8 under --fp8-param-gather, whose backward GEMM reads it transposed.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mgt::cuda {

// transposed [cols, rows] = codes [rows, cols]ᵀ; scale_inv and transposed_scale_inv (one fp32
// each) become 1/scale, rounded as the casts round it.
void fp8_transpose(const uint8_t* codes, int64_t rows, int64_t cols, const float* scale, float* scale_inv,
                   uint8_t* transposed, float* transposed_scale_inv, cudaStream_t stream);

}  // namespace mgt::cuda
