// The per-token arithmetic of Mixture-of-Experts routing, written once for the CPU's kernels
// (kernels/cpu/moe_routing.cpp) and the GPU's (kernels/cuda/moe_routing.cu): each function reads
// one token's row of router logits and writes that token's row of outputs, with no memory of its
// own, so that a GPU thread can run it as it is. Megatron's definitions: topk_softmax_with_capacity,
// group_limited_topk, switch_load_balancing_loss_func, sequence_load_balancing_loss_func and
// z_loss_func in megatron/core/transformer/moe/moe_utils.py, compute_routing_scores_for_aux_loss
// in megatron/core/transformer/moe/router.py. Ties in a top-k choice go to the lower expert index.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/moe_routing_params.hpp"

#ifdef __CUDACC__
#define MGT_MOE_FN __host__ __device__ inline
#else
#define MGT_MOE_FN inline
#endif

namespace mgt::moe_math {

MGT_MOE_FN float row_max(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Σ exp(x − max) over the row.
MGT_MOE_FN float row_exp_sum(const float* x, int64_t n, float max) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += expf(x[i] - max);
  return s;
}

MGT_MOE_FN float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// The score by which expert e is chosen: the logit (softmax after the choice), the softmax over
// all experts (before it), or the sigmoid, plus the expert bias when there is one
// (topk_softmax_with_capacity's scores_for_routing).
MGT_MOE_FN float choice_score(const float* logits, int64_t e, const MoeRoutingParams& p, float max, float sum) {
  if (p.sigmoid) return p.expert_bias ? sigmoid(logits[e]) + p.expert_bias[e] : sigmoid(logits[e]);
  if (p.pre_softmax) return expf(logits[e] - max) / sum;
  return logits[e];
}

// Marks in `chosen` (0 or 1 per expert) the top-k experts of one token, as topk_softmax_with_capacity
// chooses them (group_limited_topk under group_topk), or by the token's row of p.choice_scores
// where given (`choice`). `scratch` holds `experts` floats.
MGT_MOE_FN void choose_topk(const float* logits, const MoeRoutingParams& p, float* chosen, float* scratch,
                            const float* choice = nullptr) {
  const int64_t E = p.experts;
  const float max = row_max(logits, E);
  const float sum = row_exp_sum(logits, E, max);
  // scratch[e]: the choice score, or -inf where the expert may not be chosen.
  for (int64_t e = 0; e < E; ++e) {
    scratch[e] = choice != nullptr ? choice[e] : choice_score(logits, e, p, max, sum);
    chosen[e] = 0.0f;
  }
  if (p.group_topk > 0) {
    // Each group's score: the sum of its top topk / group_topk scores; the group_topk best groups
    // stay eligible. chosen[] marks the experts taken while summing, then the chosen groups.
    const int64_t per_group = E / p.num_groups;
    const int64_t take = p.topk / p.group_topk;
    for (int64_t round = 0; round < p.group_topk; ++round) {
      int64_t best_group = -1;
      float best_score = 0.0f;
      for (int64_t g = 0; g < p.num_groups; ++g) {
        if (chosen[g * per_group] < 0.0f) continue;  // already picked (marked −1 below)
        float group_score = 0.0f;
        for (int64_t j = 0; j < take; ++j) {
          int64_t best = -1;
          for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e)
            if (chosen[e] == 0.0f && (best < 0 || scratch[e] > scratch[best])) best = e;
          group_score += scratch[best];
          chosen[best] = 2.0f;  // taken while summing this group
        }
        for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e)
          if (chosen[e] == 2.0f) chosen[e] = 0.0f;
        if (best_group < 0 || group_score > best_score) {
          best_group = g;
          best_score = group_score;
        }
      }
      for (int64_t e = best_group * per_group; e < (best_group + 1) * per_group; ++e) chosen[e] = -1.0f;
    }
    // −1: a picked group's expert, eligible; 0: not eligible.
    for (int64_t e = 0; e < E; ++e) {
      if (chosen[e] == 0.0f) scratch[e] = -INFINITY;
      chosen[e] = 0.0f;
    }
  }
  for (int64_t round = 0; round < p.topk; ++round) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e)
      if (chosen[e] == 0.0f && scratch[e] > -INFINITY && (best < 0 || scratch[e] > scratch[best])) best = e;
    if (best < 0) break;
    chosen[best] = 1.0f;
  }
}

// The choice a token's gradient goes through (`chosen`): its routing map's row under sinkhorn
// routing (made by scores the backward does not have), else choose_topk's again.
MGT_MOE_FN void backward_choice(const float* logits, const float* map_row, const MoeRoutingParams& p, float* chosen,
                                float* scratch) {
  if (!p.sinkhorn) return choose_topk(logits, p, chosen, scratch);
  for (int64_t e = 0; e < p.experts; ++e) chosen[e] = map_row[e];
}

// One token's gates before capacity (topk_masked_gates): the chosen experts' probabilities, 0
// elsewhere. `chosen` as choose_topk left it.
MGT_MOE_FN void topk_gates(const float* logits, const MoeRoutingParams& p, const float* chosen, float* gates) {
  const int64_t E = p.experts;
  const float max = row_max(logits, E);
  const float sum = row_exp_sum(logits, E, max);
  float chosen_max = -INFINITY;
  for (int64_t e = 0; e < E; ++e)
    if (chosen[e] > 0.0f && logits[e] > chosen_max) chosen_max = logits[e];
  float chosen_sum = 0.0f;
  for (int64_t e = 0; e < E; ++e) {
    if (chosen[e] <= 0.0f) continue;
    if (p.sigmoid) chosen_sum += sigmoid(logits[e]);
    else if (!p.pre_softmax) chosen_sum += expf(logits[e] - chosen_max);
  }
  for (int64_t e = 0; e < E; ++e) {
    float g = 0.0f;
    if (chosen[e] > 0.0f) {
      if (p.sigmoid) g = p.topk > 1 ? sigmoid(logits[e]) / (chosen_sum + 1e-20f) : sigmoid(logits[e]);
      else if (p.pre_softmax) g = expf(logits[e] - max) / sum;
      else g = expf(logits[e] - chosen_max) / chosen_sum;
      if (p.scaling_factor != 0.0f) g *= p.scaling_factor;
    }
    gates[e] = g;
  }
}

// The auxiliary loss's score of expert e for one token (compute_routing_scores_for_aux_loss):
// the softmax over all experts, or the sigmoids normalised to sum 1.
MGT_MOE_FN float aux_score(const float* logits, int64_t e, const MoeRoutingParams& p, float max, float sum,
                           float sigmoid_sum) {
  if (p.sigmoid) return sigmoid(logits[e]) / (sigmoid_sum + 1e-20f);
  return expf(logits[e] - max) / sum;
}

MGT_MOE_FN float sigmoid_row_sum(const float* logits, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += sigmoid(logits[i]);
  return s;
}

// Megatron's sinkhorn (moe_utils.py): its tolerance on the mean change of the experts' factors,
// the epsilon of its divisions, and a bound on its rounds (Megatron has none) so that no input
// can loop for ever.
constexpr float kSinkhornTolerance = 1e-4f;
constexpr float kSinkhornEps = 1e-8f;
constexpr int kSinkhornMaxRounds = 10000;

// A token's or an expert's factor from its weighted sum of exp(logits): Megatron's
// (1 / n) * 1 / (sum + eps), which torch evaluates as reciprocal(sum + eps) · (1 / n).
MGT_MOE_FN float sinkhorn_factor(float sum, float inverse_count) {
  return (1.0f / (sum + kSinkhornEps)) * inverse_count;
}

// 1 / n as torch multiplies by it: Python's double, rounded to float.
MGT_MOE_FN float sinkhorn_inverse_count(int64_t n) { return static_cast<float>(1.0 / static_cast<double>(n)); }

// The factor on Σ_e P_e·f_e (P the scores summed over a group's tokens, f its tokens per expert)
// that makes the auxiliary loss: num_experts / (tokens² · topk) for aux_loss, num_experts /
// (batch · seq² · topk) for seq_aux_loss, the tokens and the sequences' length counted over all
// aux_partitions (switch_load_balancing_loss_func's num_tokens · num_sub_sequence,
// sequence_load_balancing_loss_func's seq_length · num_sub_sequence).
MGT_MOE_FN double aux_loss_factor(const MoeRoutingParams& p) {
  const double E = static_cast<double>(p.experts);
  const double T = static_cast<double>(p.tokens) * static_cast<double>(p.aux_partitions);
  const double k = static_cast<double>(p.topk);
  if (p.aux_groups <= 1) return E / (T * T * k);
  const double B = static_cast<double>(p.aux_groups);
  const double S = T / B;
  return E / (B * S * S * k);
}

// Whether expert e is among the top-k of the token's auxiliary scores (the loss's routing map,
// plain top-k without groups or capacity): fewer than k experts score higher, counting ties at
// lower indices as higher.
MGT_MOE_FN bool in_aux_topk(const float* logits, int64_t e, const MoeRoutingParams& p, float max, float sum,
                            float sigmoid_sum) {
  const float mine = aux_score(logits, e, p, max, sum, sigmoid_sum);
  int64_t above = 0;
  for (int64_t j = 0; j < p.experts; ++j) {
    const float other = aux_score(logits, j, p, max, sum, sigmoid_sum);
    if (other > mine || (other == mine && j < e)) ++above;
  }
  return above < p.topk;
}

// One token's gradient of the logits (d_logits, overwritten) from:
//  - d_gates, the gradient of its gates before capacity (dropped experts' entries zero);
//  - with aux_grad != 0, the auxiliary loss, aux_grad · ∂(Σ_e P_e·f_e)/∂scores where f = counts
//    (the tokens per expert of the token's group, `counts` [experts]) and `aux_factor` the
//    loss's normalisation (see moe_route_backward);
//  - with z_grad != 0, the z-loss z_grad · ∂(lse²)/∂logits.
// `chosen` as choose_topk leaves it for this token.
MGT_MOE_FN void logits_gradient(const float* logits, const MoeRoutingParams& p, const float* chosen,
                                const float* d_gates, const float* counts, float aux_factor, float z_grad,
                                float* d_logits) {
  const int64_t E = p.experts;
  const float max = row_max(logits, E);
  const float sum = row_exp_sum(logits, E, max);
  const float sf = p.scaling_factor != 0.0f ? p.scaling_factor : 1.0f;
  for (int64_t e = 0; e < E; ++e) d_logits[e] = 0.0f;
  if (p.sigmoid) {
    float z = 0.0f;
    float weighted = 0.0f;  // Σ_j d_j·s_j over the chosen
    for (int64_t e = 0; e < E; ++e)
      if (chosen[e] > 0.0f) {
        z += sigmoid(logits[e]);
        weighted += d_gates[e] * sigmoid(logits[e]);
      }
    z += 1e-20f;
    for (int64_t e = 0; e < E; ++e) {
      if (chosen[e] <= 0.0f) continue;
      const float s = sigmoid(logits[e]);
      const float ds = p.topk > 1 ? sf * (d_gates[e] / z - weighted / (z * z)) : sf * d_gates[e];
      d_logits[e] = ds * s * (1.0f - s);
    }
  } else if (p.pre_softmax) {
    // gates = softmax(all)[chosen]·sf: the softmax's backward of d_scores = sf·d_gates on the chosen.
    float dot = 0.0f;
    for (int64_t e = 0; e < E; ++e)
      if (chosen[e] > 0.0f) dot += expf(logits[e] - max) / sum * sf * d_gates[e];
    for (int64_t e = 0; e < E; ++e) {
      const float s = expf(logits[e] - max) / sum;
      const float ds = chosen[e] > 0.0f ? sf * d_gates[e] : 0.0f;
      d_logits[e] = s * (ds - dot);
    }
  } else {
    float chosen_max = -INFINITY;
    for (int64_t e = 0; e < E; ++e)
      if (chosen[e] > 0.0f && logits[e] > chosen_max) chosen_max = logits[e];
    float chosen_sum = 0.0f;
    for (int64_t e = 0; e < E; ++e)
      if (chosen[e] > 0.0f) chosen_sum += expf(logits[e] - chosen_max);
    float dot = 0.0f;
    for (int64_t e = 0; e < E; ++e)
      if (chosen[e] > 0.0f) dot += expf(logits[e] - chosen_max) / chosen_sum * sf * d_gates[e];
    for (int64_t e = 0; e < E; ++e) {
      if (chosen[e] <= 0.0f) continue;
      const float q = expf(logits[e] - chosen_max) / chosen_sum;
      d_logits[e] = q * (sf * d_gates[e] - dot);
    }
  }
  if (aux_factor != 0.0f) {
    // d aux / d score_e = aux_factor · f_e, then through the score function.
    if (p.sigmoid) {
      const float z = sigmoid_row_sum(logits, E) + 1e-20f;
      float weighted = 0.0f;  // Σ_j g_j·σ_j
      for (int64_t j = 0; j < E; ++j) weighted += aux_factor * counts[j] * sigmoid(logits[j]);
      for (int64_t e = 0; e < E; ++e) {
        const float s = sigmoid(logits[e]);
        const float ds = aux_factor * counts[e] / z - weighted / (z * z);
        d_logits[e] += ds * s * (1.0f - s);
      }
    } else {
      float dot = 0.0f;
      for (int64_t j = 0; j < E; ++j) dot += expf(logits[j] - max) / sum * aux_factor * counts[j];
      for (int64_t e = 0; e < E; ++e) {
        const float s = expf(logits[e] - max) / sum;
        d_logits[e] += s * (aux_factor * counts[e] - dot);
      }
    }
  }
  if (z_grad != 0.0f) {
    const float lse = max + logf(sum);
    for (int64_t e = 0; e < E; ++e) d_logits[e] += z_grad * 2.0f * lse * expf(logits[e] - max) / sum;
  }
}

}  // namespace mgt::moe_math
