// Megatron-Core's MoELayer (megatron/core/transformer/moe/moe_layer.py) in place of a layer's MLP:
// route (moe_router.hpp), permute the tokens to the experts (moe_token_dispatcher.hpp), run the
// experts (moe_experts.hpp), combine their outputs weighted by the routing probabilities, and
// add the shared experts' output. Under expert parallelism each rank holds its share of the
// experts and the tokens travel to them and back by all-to-all (moe_token_dispatcher.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include "model/moe_buffers.hpp"
#include "model/moe_experts.hpp"
#include "model/moe_router.hpp"
#include "model/moe_token_dispatcher.hpp"

namespace mgt {

class MoeLayer {
public:
  // `expert_group` (may be null): the expert-model-parallel group; must outlive the layer.
  MoeLayer(GptParameters& params, int64_t layer, dist::Communicator* expert_group = nullptr);

  // output [T, h] from input [T, h] (the pre-MLP norm's output).
  void forward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
               const MoeScratch& scratch, FloatView output) const;
  // d_input [T, h] overwritten; the parameters' gradients added.
  void backward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                const MoeScratch& scratch, ConstFloatView d_output, FloatView d_input) const;

private:
  Backend* backend_;
  int64_t hidden_;
  MoeRouter router_;
  MoeTokenDispatcher dispatcher_;
  MoeExperts experts_;
  std::optional<ExpertMlp> shared_;
};

}  // namespace mgt
