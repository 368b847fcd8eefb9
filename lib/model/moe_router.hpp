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
  // ctx.moe_statistics in training. Under sequence parallelism (the whole sequence's tokens in
  // input) each rank's part is routed with its own capacity, as Megatron routes it.
  void forward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
               const MoeScratch& scratch) const;
  // From scratch.d_probs: the router weight's gradient (added) and d_input (added to; nothing
  // added when it is empty).
  void backward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                const MoeScratch& scratch, FloatView d_input) const;

private:
  Backend* backend_;
  int64_t layer_;
  MoeConfig moe_;
  LinearLayer gate_;
};

}  // namespace mgt
