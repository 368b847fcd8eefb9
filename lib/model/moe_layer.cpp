#include "model/moe_layer.hpp"

#include <numeric>

#include "core/error.hpp"

namespace mgt {

MoeLayer::MoeLayer(GptParameters& params, int64_t layer, dist::Communicator* expert_group)
    : backend_(&params.backend()),
      hidden_(params.config().hidden_size),
      router_(params, layer, layer_prefix(layer) + ".mlp"),
      dispatcher_(params.backend(), params.config().moe, params.config().hidden_size, expert_group),
      experts_(params, layer_prefix(layer) + ".mlp") {
  if (dispatcher_.expert_parallel() != (params.expert_parallel().size > 1) ||
      (expert_group && expert_group->size() != params.expert_parallel().size))
    throw Error("internal error: the parameters are for " + std::to_string(params.expert_parallel().size) +
                " expert-parallel ranks, the MoE layer runs on a group of " +
                std::to_string(expert_group ? expert_group->size() : 1));
  if (params.config().moe.shared_expert_intermediate_size > 0)
    shared_.emplace(params, layer_prefix(layer) + ".mlp.shared_experts");
}

void MoeLayer::forward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                       const MoeScratch& scratch, FloatView output) const {
  const int64_t tokens = ctx.tokens();
  router_.forward(ctx, input, saved, scratch);
  const std::vector<int64_t> rows_of = dispatcher_.dispatch(input, tokens, saved);
  const int64_t rows = std::accumulate(rows_of.begin(), rows_of.end(), int64_t{0});
  if (dispatcher_.expert_parallel()) {
    const ExpertExchange x = dispatcher_.plan_exchange(rows_of, saved);
    dispatcher_.to_experts(x, saved.permuted, saved, scratch.ep_exchange, saved.expert_input);
    experts_.forward(x.expert_rows, saved.expert_input, saved, scratch.ep_sorted);
    dispatcher_.from_experts(x, scratch.ep_sorted, saved, scratch.ep_exchange, saved.expert_output);
  } else {
    experts_.forward(rows_of, saved.permuted, saved, saved.expert_output);
  }
  dispatcher_.combine(tokens, rows, saved, output);
  if (shared_) {
    // Megatron's MoELayer returns output + shared_experts(hidden_states).
    const FloatView y = scratch.shared_output.first(tokens * hidden_);
    shared_->forward(input, tokens, saved.shared_fc1_output, saved.shared_activation_output, y);
    backend_->accumulate(output, y);
  }
}

void MoeLayer::backward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                        const MoeScratch& scratch, ConstFloatView d_output, FloatView d_input) const {
  const int64_t tokens = ctx.tokens();
  const std::vector<int64_t> rows_of = dispatcher_.expert_rows(saved);
  const int64_t rows = std::accumulate(rows_of.begin(), rows_of.end(), int64_t{0});
  dispatcher_.combine_backward(d_output, tokens, rows, saved, scratch);
  if (dispatcher_.expert_parallel()) {
    // The forward's path reversed: ∂/∂expert_output to the experts, ∂/∂input of theirs back.
    const ExpertExchange x = dispatcher_.saved_exchange(rows_of, saved);
    dispatcher_.to_experts(x, scratch.d_rows, saved, scratch.ep_exchange, scratch.ep_sorted);
    experts_.backward(x.expert_rows, scratch.ep_sorted, saved.expert_input, saved, scratch, scratch.ep_d_input);
    dispatcher_.from_experts(x, scratch.ep_d_input, saved, scratch.ep_exchange, scratch.d_permuted);
  } else {
    experts_.backward(rows_of, scratch.d_rows, saved.permuted, saved, scratch, scratch.d_permuted);
  }
  dispatcher_.dispatch_backward(scratch.d_permuted.first(rows * hidden_), tokens, rows, saved, d_input);
  router_.backward(ctx, input, saved, scratch, d_input);
  if (shared_) {
    const FloatView dx = scratch.d_hidden.first(tokens * hidden_);
    shared_->backward(d_output, input, tokens, saved.shared_fc1_output, saved.shared_activation_output,
                      scratch.d_activation.first(tokens * shared_->ffn()),
                      scratch.d_fc1.first(tokens * shared_->fc1_size()), dx);
    backend_->accumulate(d_input, dx);
  }
}

}  // namespace mgt
