// A GPT model's parameters in ONE contiguous fp32 buffer and their gradients in a second buffer
// of the same layout, described by the parameter table. One buffer lets a distributed optimizer
// shard contiguous ranges, lets gradient reduction run over large messages, and gives checkpoints
// a single table to iterate.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/backend.hpp"
#include "model/gpt_config.hpp"
#include "model/gradient_zeroing.hpp"
#include "model/moe_expert_bias.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

// What the parameters are for: training holds a gradient buffer beside them; inference (mgt-eval,
// mgt-generate) does not, saving 4 bytes per parameter (32 GB of an 8B model's). With a bf16 or
// fp16 compute copy, inference keeps only that copy (write_param converts into it): 2 bytes per
// parameter in all, unless the forward reads the fp32 parameters (forward_reads_params).
enum class ParameterUse { kTraining, kInference };

// Whether parameters built for `use`, computing in `activation`, keep the fp32 parameters: always
// in training and in fp32; in inference with a 2-byte copy only where the forward reads them (a
// zero-centred norm's 1 + w).
inline bool keeps_fp32_parameters(ParameterUse use, FloatType activation, const GptConfig& config) {
  return use == ParameterUse::kTraining || activation == FloatType::kF32 || config.layernorm_zero_centered_gamma;
}

class GptParameters {
public:
  // Allocates both buffers, parameters and gradients zeroed; call initialize() for initial values.
  // A pipeline stage holds its part of the model only (gpt_parameter_table); config stays the
  // whole model's.
  // With expert parallelism, this rank's experts only (gpt_parameter_table).
  GptParameters(const GptConfig& config, Backend& backend, const TensorParallelRank& tp = {},
                const PipelineStage& stage = {}, const ExpertParallelRank& ep = {},
                ParameterUse use = ParameterUse::kTraining);

  const GptConfig& config() const { return config_; }  // resolved
  const TensorParallelRank& tensor_parallel() const { return tp_; }
  const PipelineStage& pipeline_stage() const { return stage_; }
  const ExpertParallelRank& expert_parallel() const { return ep_; }
  const ParameterTable& table() const { return table_; }
  std::span<const ParameterEntry> entries() const { return table_.entries; }
  const ParameterEntry* find(std::string_view name) const { return table_.find(name); }
  const ParameterEntry& entry(std::string_view name) const { return table_.at(name); }
  Backend& backend() const { return *backend_; }

  // Whole buffers, alignment gaps included (they stay zero). A mutable view of the parameters
  // marks the compute copy stale: whoever writes the parameters takes one.
  FloatView params() {
    if (compute_only()) throw_no_fp32_parameters();
    compute_stale_ = true;
    ++params_version_;
    return params_.view();
  }
  // Changes whenever a mutable view of the parameters is taken: what is derived from the
  // parameters (a zero-centred norm's 1 + w, model/norm_layer.hpp) compares it with the value
  // it was made at.
  std::uint64_t params_version() const { return params_version_; }
  // Empty when only the compute copy is kept (compute_only).
  ConstFloatView params() const { return params_.view(); }
  // Parameters built for inference with a bf16 or fp16 compute copy keep no fp32 parameters.
  bool compute_only() const { return params_.empty() && !compute_.empty(); }
  // Empty for parameters built for inference (their layers' gradient views are empty too).
  FloatView grads() { return grads_.view(); }
  ConstFloatView grads() const { return grads_.view(); }
  bool for_inference() const { return use_ == ParameterUse::kInference; }
  // One tensor's local shard.
  FloatView param(const ParameterEntry& e) { return params().subspan(e.offset, e.numel()); }
  ConstFloatView param(const ParameterEntry& e) const {
    return params().subspan(e.offset, e.numel());
  }
  FloatView grad(const ParameterEntry& e) { return for_inference() ? FloatView() : grads().subspan(e.offset, e.numel()); }
  ConstFloatView grad(const ParameterEntry& e) const {
    return for_inference() ? ConstFloatView() : grads().subspan(e.offset, e.numel());
  }

  // One tensor's weights as the layers compute with them: the fp32 parameters themselves, or,
  // when the backend's activation type is bf16, their bf16 copy (Megatron's bf16 model weights
  // beside the fp32 main parameters). The copy follows the parameters once refreshed.
  ConstFloatView compute_param(const ParameterEntry& e) const {
    return compute_params().subspan(e.offset, e.numel());
  }
  ConstFloatView compute_params() const { return compute_.empty() ? params() : compute_.view(); }
  // Brings the compute copy up to date with the parameters if they may have changed since the
  // last refresh (one conversion pass; nothing to do for fp32). Call before a forward pass.
  void refresh_compute_copy();
  // For an optimizer that writes the compute copy along with the weights (Backend::adamw_update):
  // the copy itself (empty for fp32), and the note that it now matches the weights again.
  FloatView compute_copy() { return compute_.view(); }
  void mark_compute_copy_fresh() { compute_stale_ = false; }
  // Whether refresh_compute_copy() has a conversion to do.
  bool compute_copy_stale() const { return !compute_.empty() && compute_stale_; }
  // Whether a forward reads the fp32 parameters themselves and not only the compute copy (a
  // zero-centred norm sums 1 + w from them): the distributed optimizer then gathers those.
  bool forward_reads_params() const { return config_.layernorm_zero_centered_gamma; }

  // Megatron's initialisation, a pure function of (seed, name, global element index).
  void initialize(uint64_t seed);
  // Zeroes the gradients for a new iteration. Those of the entries given to defer_grad_zeroing
  // are zero to their writers without a fill: the first write of each overwrites it
  // (grad_write_accumulates), and settle_grads fills those no write reached
  // (model/gradient_zeroing.hpp). The model settles them at the end of its backward. Every
  // iteration that computes gradients starts here: parameters built for inference throw.
  void zero_grads();
  // e's gradient is written only by writers that ask grad_write_accumulates before each write.
  void defer_grad_zeroing(const ParameterEntry& e) { grad_zeroing_.defer(e); }
  // Whether the next write of e's gradient adds to it (false: it writes over it, the iteration's
  // first write of a deferred entry). A writer that can only add fills the gradient first then.
  bool grad_write_accumulates(const ParameterEntry& e) { return grad_zeroing_.accumulates(e); }
  // The deferred gradients no write reached since zero_grads filled with zeros: all of them, or
  // those of the entries starting in [begin, end).
  void settle_grads() { grad_zeroing_.settle(*backend_, grads_.view()); }
  void settle_grads(int64_t begin, int64_t end) { grad_zeroing_.settle_range(*backend_, grads_.view(), begin, end); }

  // Host copies of one tensor's local shard: for checkpoints, conversion and tests. Without fp32
  // parameters (compute_only), from and into the compute copy.
  std::vector<float> read_param(const ParameterEntry& e) const;
  std::vector<float> read_grad(const ParameterEntry& e) const;
  void write_param(const ParameterEntry& e, std::span<const float> values);

  // Σ local elements over the table (the buffer size minus alignment gaps).
  int64_t num_local_elements() const;

  // The MoE routers' expert biases (--moe-router-enable-expert-bias), buffers beside the
  // parameters that the optimizer does not update (model/moe_expert_bias.hpp).
  MoeExpertBias& moe_expert_bias() { return moe_expert_bias_; }
  const MoeExpertBias& moe_expert_bias() const { return moe_expert_bias_; }

private:
  [[noreturn]] static void throw_no_fp32_parameters();

  Backend* backend_;
  GptConfig config_;
  TensorParallelRank tp_;
  PipelineStage stage_;
  ExpertParallelRank ep_;
  ParameterTable table_;
  DeviceBuffer params_;
  ParameterUse use_;
  DeviceBuffer grads_;  // empty for inference
  DeviceBuffer compute_;  // empty when the activation type is fp32
  bool compute_stale_ = true;
  std::uint64_t params_version_ = 0;
  MoeExpertBias moe_expert_bias_;
  GradientZeroing grad_zeroing_;
};

}  // namespace mgt
