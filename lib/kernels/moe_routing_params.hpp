// The parameters of the Mixture-of-Experts routing operations (Backend::moe_route and
// moe_route_backward): Megatron-Core's TopKRouter (megatron/core/transformer/moe/router.py) and
// topk_softmax_with_capacity (megatron/core/transformer/moe/moe_utils.py) as plain numbers.
#pragma once
#include <cstdint>

namespace mgt {

struct MoeRoutingParams {
  int64_t tokens = 0;   // rows of the logits, ordered [s, b]: token t is position t / batch of sequence t % batch
  int64_t experts = 0;  // columns
  int64_t topk = 1;
  bool sigmoid = false;      // --moe-router-score-function sigmoid (else softmax)
  bool pre_softmax = false;  // --moe-router-pre-softmax
  int64_t num_groups = 0;    // group-limited routing when group_topk > 0
  int64_t group_topk = 0;
  float scaling_factor = 0.0f;  // 0: none
  int64_t capacity = -1;        // tokens each expert keeps at most; < 0: dropless
  bool drop_by_position = false;  // --moe-token-drop-policy position (else probs)
  // The auxiliary load-balancing loss's groups of tokens: 0 for no auxiliary loss, 1 for
  // aux_loss (the whole micro-batch), the batch size for seq_aux_loss (each sequence).
  int64_t aux_groups = 0;
  bool z_loss = false;  // compute the z-loss statistic
  // --moe-router-enable-expert-bias: [experts] fp32 in the backend's memory, added to the sigmoid
  // scores for the top-k choice only (not to the gates); null for none.
  const float* expert_bias = nullptr;
};

}  // namespace mgt
