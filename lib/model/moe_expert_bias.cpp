#include "model/moe_expert_bias.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

void update_expert_bias(std::span<float> bias, std::span<const float> tokens_per_expert, double rate) {
  if (bias.size() != tokens_per_expert.size())
    throw Error("internal error: " + std::to_string(bias.size()) + " expert biases for " +
                std::to_string(tokens_per_expert.size()) + " token counts");
  if (bias.empty()) return;
  float total = 0.0f;
  for (const float n : tokens_per_expert) total += n;
  const float average = total / static_cast<float>(tokens_per_expert.size());
  const float step = static_cast<float>(rate);
  for (std::size_t e = 0; e < bias.size(); ++e) {
    const float offset = average - tokens_per_expert[e];
    const float sign = offset > 0.0f ? 1.0f : offset < 0.0f ? -1.0f : 0.0f;
    bias[e] += sign * step;
  }
}

MoeExpertBias::MoeExpertBias(const MoeConfig& moe, std::int64_t num_layers, const PipelineStage& stage,
                             Backend& backend)
    : backend_(&backend), experts_(moe.num_experts), rate_(moe.bias_update_rate) {
  if (!moe.enabled() || !moe.enable_expert_bias) return;
  for (std::int64_t layer = 0; layer < num_layers; ++layer)
    if (moe.is_moe_layer(layer) && stage.holds_layer(layer, num_layers)) layers_.push_back(layer);
  if (layers_.empty()) return;
  const std::int64_t n = static_cast<std::int64_t>(layers_.size()) * experts_;
  host_bias_.assign(static_cast<std::size_t>(n), 0.0f);
  bias_ = DeviceArray<float>(backend, n);
  tokens_ = DeviceArray<float>(backend, n);
  backend.copy_from_host<float>(host_bias_, bias_.view());
  backend.copy_from_host<float>(host_bias_, tokens_.view());
}

std::int64_t MoeExpertBias::slot(std::int64_t layer) const {
  const auto it = std::find(layers_.begin(), layers_.end(), layer);
  return it == layers_.end() ? -1 : static_cast<std::int64_t>(it - layers_.begin());
}

const float* MoeExpertBias::bias(std::int64_t layer) const {
  const std::int64_t s = slot(layer);
  return s < 0 ? nullptr : bias_.view().data() + s * experts_;
}

FloatView MoeExpertBias::tokens_per_expert(std::int64_t layer) {
  const std::int64_t s = slot(layer);
  return s < 0 ? FloatView() : FloatView(tokens_.view().data() + s * experts_, experts_);
}

std::string MoeExpertBias::name(std::int64_t layer) { return layer_prefix(layer) + ".mlp.router.expert_bias"; }

std::vector<float> MoeExpertBias::read(std::int64_t layer) const {
  const std::int64_t s = slot(layer);
  if (s < 0) throw Error("internal error: layer " + std::to_string(layer) + " has no expert bias on this rank");
  const auto first = host_bias_.begin() + s * experts_;
  return std::vector<float>(first, first + experts_);
}

void MoeExpertBias::write(std::int64_t layer, std::span<const float> values) {
  const std::int64_t s = slot(layer);
  if (s < 0) throw Error("internal error: layer " + std::to_string(layer) + " has no expert bias on this rank");
  if (static_cast<std::int64_t>(values.size()) != experts_)
    throw Error("internal error: " + std::to_string(values.size()) + " expert biases for " +
                std::to_string(experts_) + " experts");
  std::copy(values.begin(), values.end(), host_bias_.begin() + s * experts_);
  backend_->copy_from_host<float>(host_bias_, bias_.view());
}

void MoeExpertBias::update(dist::Communicator* group) {
  if (!enabled()) return;
  // Megatron sums over the tensor-, context- and data-parallel ranks; here the tensor-parallel
  // ranks route the same tokens (model/moe_layer.hpp), and a count scaled alike on every expert
  // has the same sign of its offset from the mean.
  if (group && group->size() > 1) group->all_reduce(tokens_.view(), dist::ReduceOp::Sum);
  std::vector<float> counts(host_bias_.size());
  backend_->copy_to_host<float>(tokens_.view(), counts);
  for (std::size_t s = 0; s < layers_.size(); ++s) {
    const std::size_t first = s * static_cast<std::size_t>(experts_);
    update_expert_bias(std::span<float>(host_bias_).subspan(first, static_cast<std::size_t>(experts_)),
                       std::span<const float>(counts).subspan(first, static_cast<std::size_t>(experts_)), rate_);
  }
  backend_->copy_from_host<float>(host_bias_, bias_.view());
  std::fill(counts.begin(), counts.end(), 0.0f);
  backend_->copy_from_host<float>(counts, tokens_.view());
}

}  // namespace mgt
