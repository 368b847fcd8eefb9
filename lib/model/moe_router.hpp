// Megatron-Core's TopKRouter (megatron/core/transformer/moe/router.py): the gating linear
// (router.weight, [experts, h], fp32 logits), the top-k choice with its score function, groups,
// scaling factor and capacity, and the auxiliary load-balancing loss and z-loss, whose gradients
// the backward adds to the logits' (MoEAuxLossAutoScaler) and whose values it records for the
// log (save_to_aux_losses_tracker).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include "model/linear_layer.hpp"
#include "model/moe_buffers.hpp"

namespace mgt {

class MoeRouter {
public:
  // `prefix`: the layer's "decoder.layers.{i}.mlp".
  MoeRouter(GptParameters& params, int64_t layer, const std::string& prefix);

  // The routing of this pass: its capacity, and the losses only in training (as Megatron
  // computes them only with gradients enabled).
  MoeRoutingParams routing(const ForwardContext& ctx) const;

  // saved.logits, probs, routing_map and aux_counts from input [T, h]; the statistics added to
  // ctx.moe_statistics in training, and with the expert bias the tokens routed to each expert
  // added to its counts (model/moe_expert_bias.hpp). Under sequence parallelism (the whole sequence's tokens in
  // input) each rank's part is routed with its own capacity, as Megatron routes it. Under context
  // parallelism the auxiliary loss's counts are summed over the group (a collective).
  void forward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
               const MoeScratch& scratch) const;
  // From scratch.d_probs: the router weight's gradient (added) and d_input (added to; nothing
  // added when it is empty).
  void backward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                const MoeScratch& scratch, FloatView d_input) const;

private:
  // --moe-input-jitter-eps: in training the gate reads its input times uniform noise in
  // [1 − eps, 1 + eps] (TopKRouter.apply_input_jitter).
  bool jitters(const ForwardContext& ctx) const { return ctx.training && moe_.input_jitter_eps > 0.0; }
  // Sinkhorn routing's choice scores for the logits [tokens, experts] of this pass.
  DeviceArray<float> sinkhorn_scores(const ForwardContext& ctx, ConstFloatView logits, int64_t tokens) const;
  // The gate's weight gradient (added) and dx = its input gradient (unless empty) from the fp32
  // logits' gradient, in the gate's GEMMs of the activations' type.
  void backward_gate(ConstFloatView d_logits, ConstFloatView gated, int64_t tokens, FloatView dx) const;
  // The gate's input: `input`, or its jittered copy made in `jittered`.
  ConstFloatView gate_input(const ForwardContext& ctx, ConstFloatView input, DeviceBuffer& jittered) const;

  Backend* backend_;
  int64_t layer_;
  MoeConfig moe_;
  LinearLayer gate_;
  MoeExpertBias* expert_bias_;  // the parameters' (disabled without --moe-router-enable-expert-bias)
};

}  // namespace mgt
