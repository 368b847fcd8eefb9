// One pre-norm GPT layer (Megatron's TransformerLayer with the local spec):
//   h = x + dropout(SelfAttention(input_layernorm(x)))
//   y = h + dropout(MLP(pre_mlp_layernorm(h)))
// with an explicit backward. Activations are [s, b, hidden], sequence-major; under sequence
// parallelism the layer's input, output, norms, residual and dropouts hold this rank's
// [s/tp, b, hidden] slice, and the attention and MLP gather and reduce-scatter around their
// tensor-parallel regions.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include <optional>

#include "model/mlp.hpp"
#include "model/moe_layer.hpp"
#include "model/norm_fp8_cast.hpp"
#include "model/norm_layer.hpp"
#include "model/self_attention.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

// What the backward of one layer reads (besides the layer input).
struct LayerActivations {
  // [s, b, h], whole under sequence parallelism too (the all-gathered input of linear_qkv and
  // linear_fc1, kept so that their backward needs no second all-gather). Neither is written where
  // the norm casts its output to FP8 itself (model/norm_fp8_cast.hpp); then it may be empty.
  FloatView input_norm_output;
  NormStats input_norm;
  AttentionActivations attention;
  FloatView residual;  // h = x + dropout(attention), [s, b, h]
  FloatView pre_mlp_norm_output;
  NormStats pre_mlp_norm;
  MlpActivations mlp;
  MoeActivations moe;  // an MoE layer's (model/moe_layer.hpp)
};

struct LayerScratch {
  AttentionScratch attention;
  MlpScratch mlp;
  MoeScratch moe;  // MoE layers'
  FloatView hidden_a;  // [s, b, h] ([s/tp, b, h] under sequence parallelism)
  FloatView hidden_b;  // [s, b, h] ([s/tp, b, h] under sequence parallelism)
};

class TransformerLayer {
public:
  // `tp` must outlive the layer.
  // With `fp8` (null: the model's precision) its four linear layers compute in FP8.
  // `expert_group` (may be null): an MoE layer's expert-model-parallel group.
  TransformerLayer(GptParameters& params, int64_t layer, const TensorParallelMappings& tp,
                   Fp8Training* fp8 = nullptr, dist::Communicator* expert_group = nullptr);

  const SelfAttention& attention() const { return attention_; }
  // The dense MLP; an MoE layer (--num-experts, --moe-layer-freq) has none.
  const Mlp& mlp() const { return *mlp_; }
  bool is_moe() const { return moe_.has_value(); }

  // output must not alias input or scratch.hidden_a. With a key/value cache, see
  // SelfAttention::forward.
  void forward(const ForwardContext& ctx, ConstFloatView input, const LayerActivations& saved,
               const LayerScratch& scratch, FloatView output, const LayerKvCache* cache = nullptr) const;
  // d_hidden holds ∂loss/∂output on entry and ∂loss/∂input on return. With selective
  // recomputation what its modules discarded is rebuilt first: the pre-MLP norm output and the
  // MLP's activations before the MLP's backward, the input norm output and the core attention
  // before the attention's.
  void backward(const ForwardContext& ctx, ConstFloatView input, const LayerActivations& saved,
                const LayerScratch& scratch, FloatView d_hidden) const;

private:
  Backend* backend_;
  int64_t layer_;
  double hidden_dropout_;
  // Rebuilds a norm output that --recompute-modules layernorm discarded, from the norm's input:
  // this rank's rows, all-gathered into the whole output under sequence parallelism unless
  // `gathered_later` (the MLP's or the MoE layer's recomputed forward gathers it itself).
  void recompute_norm(const ForwardContext& ctx, const NormLayer& norm, ConstFloatView input,
                      const NormStats& stats, FloatView output, bool gathered_later) const;

  const TensorParallelMappings* tp_;
  bool recompute_core_attention_;
  bool recompute_layernorm_;
  bool recompute_mlp_;
  bool recompute_moe_;  // --recompute-modules moe
  // Which norms write their output in FP8 for the linear layer after them (norm_fp8_cast.hpp),
  // in passes without sequence parallelism.
  NormFp8Casts norm_casts_;
  NormLayer input_norm_;
  SelfAttention attention_;
  NormLayer pre_mlp_norm_;
  std::optional<Mlp> mlp_;
  std::optional<MoeLayer> moe_;
};

}  // namespace mgt
