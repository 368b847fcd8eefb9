// Backend::moe_permutation on the GPU: the token permutation's index tables built from the
// routing map where it lies, so that the host reads back only the rows per expert (the experts'
// GEMM shapes), and can do so while the permutation's gathers run.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/moe_routing_params.hpp"

namespace mgt::cuda {

// As Backend::moe_permutation; max_rows: the length of row_token and row_slot.
void moe_permutation(const float* routing_map, const MoePermutation& p, int64_t max_rows, int64_t* row_token,
                     int64_t* row_slot, int64_t* token_rows, int64_t* slot_row, int64_t* expert_rows,
                     cudaStream_t stream);

}  // namespace mgt::cuda
