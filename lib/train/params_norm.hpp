// --log-params-norm: the L2 norm of the model's parameters, as Megatron's calc_params_l2_norm
// (megatron/training/utils.py) computes it: every tensor counted once over the ranks (tensors
// replicated over the tensor-parallel ranks on rank 0 only, the last pipeline stage's copy of a
// tied word embedding left out), the sum of squares all-reduced over the model-parallel group.
// The fp32 parameters are the master weights, the ones Megatron takes under --bf16 too.
#pragma once
#include "dist/communicator.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

// Collective over `model_parallel` (tensor × pipeline; may be null for a lone replica). Data-
// parallel ranks hold the same weights, so they are not summed. With expert parallelism the
// routed experts' sum is summed over `expert_tensor_model_pipeline` instead (Megatron's expert
// tensor-model-pipeline group, one copy of every expert) and added.
double params_l2_norm(const GptParameters& params, dist::Communicator* model_parallel,
                      dist::Communicator* expert_tensor_model_pipeline = nullptr);

}  // namespace mgt
