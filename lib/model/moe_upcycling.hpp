// Upcycling: a dense model's MLP turned into the experts of an MoE layer, as Megatron-Core's
// upcycling_utils.py (core_v0.13.0) converts a dense checkpoint under --moe-use-upcycling
// (arXiv 2410.07524).
//
// The dense MLP's hidden units are cut into `granularity` slices (dense ffn / expert ffn); expert
// e takes slice e % granularity, so the experts are expansion_rate = experts / granularity copies
// of the whole MLP. Both projections are multiplied by a weight scale that keeps the layer's
// output at the dense one's scale, and router row e becomes the freshly initialised router's row
// e / granularity, so that the slices of one copy are chosen together. With granularity 1 and
// the softmax after the top-k choice (Megatron's default) the scale is 1 and the MoE layer's
// output equals the dense MLP's, whatever the router chooses.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace mgt {

struct UpcyclingPlan {
  std::int64_t granularity = 1;     // slices of the dense MLP
  std::int64_t expansion_rate = 1;  // copies of each slice among the experts
  float weight_scale = 1.0f;        // on fc1 and fc2, as the float factor Megatron multiplies by
};

// Megatron's _get_config and _get_weight_scale: granularity = dense_ffn / expert_ffn;
// the activation scale (expansion_rate · granularity²) / topk with --moe-router-pre-softmax,
// granularity otherwise; its cube root for gated units (SwiGLU), its square root otherwise.
// UsageError when the dense MLP does not cut into the experts.
UpcyclingPlan plan_upcycling(std::int64_t dense_ffn, std::int64_t expert_ffn, std::int64_t experts,
                             std::int64_t topk, bool pre_softmax, bool gated);

// Expert `expert`'s fc1 weight [chunks·expert_ffn, hidden] from the dense fc1 [chunks·dense_ffn,
// hidden] (chunks 2 for SwiGLU: the gate's rows, then the linear half's, each sliced alike).
std::vector<float> upcycled_fc1(std::span<const float> dense_fc1, std::int64_t hidden, std::int64_t dense_ffn,
                                bool gated, std::int64_t expert, const UpcyclingPlan& plan);

// Expert `expert`'s fc2 weight [hidden, expert_ffn] from the dense fc2 [hidden, dense_ffn].
std::vector<float> upcycled_fc2(std::span<const float> dense_fc2, std::int64_t hidden, std::int64_t dense_ffn,
                                std::int64_t expert, const UpcyclingPlan& plan);

// The router [experts, hidden]: row e replaced by row e / granularity.
std::vector<float> upcycled_router(std::span<const float> router, std::int64_t experts, std::int64_t hidden,
                                   std::int64_t granularity);

}  // namespace mgt
