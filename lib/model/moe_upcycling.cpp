#include "model/moe_upcycling.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Rows [first, first + count) of a row-major [*, width] matrix, each multiplied by scale, appended.
void append_scaled_rows(std::span<const float> matrix, std::int64_t width, std::int64_t first, std::int64_t count,
                        float scale, std::vector<float>& out) {
  const auto begin = matrix.begin() + first * width;
  for (auto it = begin; it != begin + count * width; ++it) out.push_back(*it * scale);
}

}  // namespace

UpcyclingPlan plan_upcycling(std::int64_t dense_ffn, std::int64_t expert_ffn, std::int64_t experts,
                             std::int64_t topk, bool pre_softmax, bool gated) {
  if (expert_ffn <= 0 || dense_ffn % expert_ffn != 0)
    throw UsageError("--moe-use-upcycling: the dense model's ffn hidden size (" + str(dense_ffn) +
                     ") must be divisible by the experts' (" + str(expert_ffn) +
                     ") (Megatron: the ffn hidden size of dense model must be divisible by ffn hidden size of moe "
                     "model)");
  UpcyclingPlan plan;
  plan.granularity = dense_ffn / expert_ffn;
  if (experts % plan.granularity != 0)
    throw UsageError("--moe-use-upcycling: --num-experts (" + str(experts) + ") must be divisible by the "
                     "granularity, the dense ffn hidden size over the experts' (" + str(plan.granularity) + ")");
  plan.expansion_rate = experts / plan.granularity;
  const double g = static_cast<double>(plan.granularity);
  const double activation_scale =
      pre_softmax ? static_cast<double>(plan.expansion_rate) * g * g / static_cast<double>(topk) : g;
  // Python's float ** (1 / 3), then the float32 operand torch multiplies an fp32 tensor by.
  plan.weight_scale = static_cast<float>(std::pow(activation_scale, gated ? 1.0 / 3.0 : 1.0 / 2.0));
  return plan;
}

std::vector<float> upcycled_fc1(std::span<const float> dense_fc1, std::int64_t hidden, std::int64_t dense_ffn,
                                bool gated, std::int64_t expert, const UpcyclingPlan& plan) {
  const std::int64_t slice = dense_ffn / plan.granularity;
  const std::int64_t piece = expert % plan.granularity;
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>((gated ? 2 : 1) * slice * hidden));
  append_scaled_rows(dense_fc1, hidden, piece * slice, slice, plan.weight_scale, out);
  if (gated) append_scaled_rows(dense_fc1, hidden, dense_ffn + piece * slice, slice, plan.weight_scale, out);
  return out;
}

std::vector<float> upcycled_fc2(std::span<const float> dense_fc2, std::int64_t hidden, std::int64_t dense_ffn,
                                std::int64_t expert, const UpcyclingPlan& plan) {
  const std::int64_t slice = dense_ffn / plan.granularity;
  const std::int64_t first = (expert % plan.granularity) * slice;
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(hidden * slice));
  for (std::int64_t row = 0; row < hidden; ++row)
    append_scaled_rows(dense_fc2.subspan(static_cast<std::size_t>(row * dense_ffn)), 1, first, slice,
                       plan.weight_scale, out);
  return out;
}

std::vector<float> upcycled_router(std::span<const float> router, std::int64_t experts, std::int64_t hidden,
                                   std::int64_t granularity) {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(experts * hidden));
  for (std::int64_t e = 0; e < experts; ++e) append_scaled_rows(router, hidden, e / granularity, 1, 1.0f, out);
  return out;
}

}  // namespace mgt
