#include "kernels/cpu/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cpu/require.hpp"
#include "kernels/moe_routing_math.hpp"

namespace mgt::cpu {

namespace {

// Within expert e's column, the tokens that keep their place under the capacity: the first
// `capacity` routed tokens by position, or the `capacity` of highest gate (ties to the earlier
// token), as topk_softmax_with_capacity's torch.topk over the column keeps them.
void apply_capacity(const MoeRoutingParams& p, const float* gates, float* probs, float* routing_map) {
  const int64_t T = p.tokens;
  const int64_t E = p.experts;
  std::vector<int64_t> routed;
  for (int64_t e = 0; e < E; ++e) {
    routed.clear();
    for (int64_t t = 0; t < T; ++t)
      if (routing_map[t * E + e] > 0.0f) routed.push_back(t);
    if (static_cast<int64_t>(routed.size()) <= p.capacity) continue;
    if (!p.drop_by_position)
      std::stable_sort(routed.begin(), routed.end(),
                       [&](int64_t a, int64_t b) { return gates[a * E + e] > gates[b * E + e]; });
    for (std::size_t i = static_cast<std::size_t>(p.capacity); i < routed.size(); ++i) {
      probs[routed[i] * E + e] = 0.0f;
      routing_map[routed[i] * E + e] = 0.0f;
    }
  }
}

// Each auxiliary-loss group's scores summed over its tokens, [aux_groups, experts]; with
// `counts`, the group's tokens per expert of the loss's top-k written there too.
std::vector<double> aux_score_sums(const float* logits, const MoeRoutingParams& p, float* counts) {
  const int64_t T = p.tokens;
  const int64_t E = p.experts;
  const int64_t A = p.aux_groups;
  std::vector<double> score_sums(static_cast<std::size_t>(A * E), 0.0);
  if (counts) std::fill(counts, counts + A * E, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits + t * E;
    const float max = moe_math::row_max(row, E);
    const float sum = moe_math::row_exp_sum(row, E, max);
    const float sigmoid_sum = moe_math::sigmoid_row_sum(row, E);
    const int64_t a = t % A;
    for (int64_t e = 0; e < E; ++e) {
      score_sums[static_cast<std::size_t>(a * E + e)] += moe_math::aux_score(row, e, p, max, sum, sigmoid_sum);
      if (counts && moe_math::in_aux_topk(row, e, p, max, sum, sigmoid_sum)) counts[a * E + e] += 1.0f;
    }
  }
  return score_sums;
}

// The auxiliary loss (divided by its coefficient) of the scores summed in `score_sums` against
// the tokens per expert in `counts`.
double aux_statistic(const std::vector<double>& score_sums, const float* counts, const MoeRoutingParams& p) {
  double aux = 0.0;
  for (int64_t i = 0; i < p.aux_groups * p.experts; ++i) aux += score_sums[static_cast<std::size_t>(i)] * counts[i];
  return aux * moe_math::aux_loss_factor(p);
}

}  // namespace

double moe_aux_factor_double(const MoeRoutingParams& p) { return moe_math::aux_loss_factor(p); }

float moe_aux_factor(const MoeRoutingParams& p) { return static_cast<float>(moe_aux_factor_double(p)); }

void moe_route(const float* logits, const MoeRoutingParams& p, float* gates, float* probs, float* routing_map,
               float* aux_counts, double* statistics, bool accumulate) {
  const int64_t T = p.tokens;
  const int64_t E = p.experts;
  require(T >= 0 && E >= 1 && p.topk >= 1 && p.topk <= E, "moe_route", "needs 1 <= topk <= experts");
  require(p.aux_groups == 0 || T % p.aux_groups == 0, "moe_route", "tokens must be a multiple of aux_groups");
  require(p.aux_partitions >= 1, "moe_route", "aux_partitions must be >= 1");
  if (p.aux_from_counts) {
    // The second pass of a partitioned loss: this rank's scores against the summed counts.
    const double aux = p.aux_groups > 0 ? aux_statistic(aux_score_sums(logits, p, nullptr), aux_counts, p) : 0.0;
    statistics[0] = accumulate ? statistics[0] + aux : aux;
    return;
  }
  std::vector<float> scratch(static_cast<std::size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits + t * E;
    moe_math::choose_topk(row, p, routing_map + t * E, scratch.data(),
                          p.choice_scores != nullptr ? p.choice_scores + t * E : nullptr);
    moe_math::topk_gates(row, p, routing_map + t * E, gates + t * E);
  }
  std::copy(gates, gates + T * E, probs);
  if (p.capacity >= 0) apply_capacity(p, gates, probs, routing_map);

  double aux = 0.0;
  if (p.aux_groups > 0) {
    const std::vector<double> score_sums = aux_score_sums(logits, p, aux_counts);
    // Partitioned, the counts are this rank's only: the statistic waits for their sums.
    if (p.aux_partitions == 1) aux = aux_statistic(score_sums, aux_counts, p);
  }
  double z = 0.0;
  if (p.z_loss && T > 0) {
    for (int64_t t = 0; t < T; ++t) {
      const float* row = logits + t * E;
      const float max = moe_math::row_max(row, E);
      const double lse = static_cast<double>(max) + std::log(static_cast<double>(moe_math::row_exp_sum(row, E, max)));
      z += lse * lse;
    }
    z /= static_cast<double>(T);
  }
  statistics[0] = accumulate ? statistics[0] + aux : aux;
  statistics[1] = accumulate ? statistics[1] + z : z;
}

void moe_route_backward(const float* logits, const MoeRoutingParams& p, const float* d_probs,
                        const float* routing_map, const float* aux_counts, float aux_grad, float z_grad,
                        float* d_logits) {
  const int64_t T = p.tokens;
  const int64_t E = p.experts;
  require(T >= 0 && E >= 1 && p.topk >= 1 && p.topk <= E, "moe_route_backward", "needs 1 <= topk <= experts");
  const float aux_factor = p.aux_groups > 0 ? aux_grad * moe_aux_factor(p) : 0.0f;
  const float z_factor = p.z_loss && T > 0 ? z_grad / static_cast<float>(T) : 0.0f;
  std::vector<float> chosen(static_cast<std::size_t>(E));
  std::vector<float> scratch(static_cast<std::size_t>(E));
  std::vector<float> d_gates(static_cast<std::size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits + t * E;
    moe_math::backward_choice(row, routing_map + t * E, p, chosen.data(), scratch.data());
    // Dropped experts' gates were multiplied by 0 (final_probs = topk_masked_gates · final_map).
    for (int64_t e = 0; e < E; ++e) d_gates[static_cast<std::size_t>(e)] = d_probs[t * E + e] * routing_map[t * E + e];
    const float* counts = p.aux_groups > 0 ? aux_counts + (t % p.aux_groups) * E : nullptr;
    moe_math::logits_gradient(row, p, chosen.data(), d_gates.data(), counts, aux_factor, z_factor, d_logits + t * E);
  }
}

void moe_sinkhorn(const float* logits, int64_t tokens, int64_t experts, float* out) {
  const int64_t T = tokens;
  const int64_t E = experts;
  float* cost = out;  // exp(logits), scaled by the factors at the end
  for (int64_t i = 0; i < T * E; ++i) cost[i] = std::exp(logits[i]);
  std::vector<float> d0(static_cast<std::size_t>(T), 1.0f);
  std::vector<float> d1(static_cast<std::size_t>(E), 1.0f);
  std::vector<float> column(static_cast<std::size_t>(E));
  const float inverse_tokens = moe_math::sinkhorn_inverse_count(T);
  const float inverse_experts = moe_math::sinkhorn_inverse_count(E);
  float error = 1e9f;
  for (int round = 0; error > moe_math::kSinkhornTolerance && round < moe_math::kSinkhornMaxRounds; ++round) {
    for (int64_t t = 0; t < T; ++t) {
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += d1[static_cast<std::size_t>(e)] * cost[t * E + e];
      d0[static_cast<std::size_t>(t)] = moe_math::sinkhorn_factor(sum, inverse_tokens);
    }
    std::fill(column.begin(), column.end(), 0.0f);
    for (int64_t t = 0; t < T; ++t) {
      const float token = d0[static_cast<std::size_t>(t)];
      for (int64_t e = 0; e < E; ++e) column[static_cast<std::size_t>(e)] += token * cost[t * E + e];
    }
    float change = 0.0f;
    for (int64_t e = 0; e < E; ++e) {
      const float updated = moe_math::sinkhorn_factor(column[static_cast<std::size_t>(e)], inverse_experts);
      change += std::fabs(d1[static_cast<std::size_t>(e)] - updated);
      d1[static_cast<std::size_t>(e)] = updated;
    }
    error = change / static_cast<float>(E);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e)
      cost[t * E + e] = d1[static_cast<std::size_t>(e)] * cost[t * E + e] * d0[static_cast<std::size_t>(t)];
}

void gather_rows(const float* in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                 const float* weights, float* out) {
  for (int64_t r = 0; r < out_rows; ++r) {
    const int64_t i = index[r];
    require(i < in_rows, "gather_rows", "index beyond the input's rows");
    float* o = out + r * cols;
    if (i < 0) {
      std::fill(o, o + cols, 0.0f);
      continue;
    }
    const float w = weights ? weights[r] : 1.0f;
    const float* x = in + i * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] = w * x[c];
  }
}

void gather_sum_rows(const float* in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                     int64_t k, const float* weights, float* out) {
  for (int64_t t = 0; t < out_rows; ++t) {
    float* o = out + t * cols;
    std::fill(o, o + cols, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = index[t * k + j];
      if (i < 0) continue;
      require(i < in_rows, "gather_sum_rows", "index beyond the input's rows");
      const float w = weights ? weights[i] : 1.0f;
      const float* x = in + i * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] += w * x[c];
    }
  }
}

void row_dot(const float* a, const float* b, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0.0f;
    for (int64_t c = 0; c < cols; ++c) s += a[r * cols + c] * b[r * cols + c];
    out[r] = s;
  }
}

void scale_rows(const float* x, const float* factors, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = factors[r] * x[r * cols + c];
}

}  // namespace mgt::cpu
