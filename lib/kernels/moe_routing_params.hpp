// The parameters of the Mixture-of-Experts routing operations (Backend::moe_route,
// moe_route_backward and moe_permutation): Megatron-Core's TopKRouter (megatron/core/transformer/moe/router.py) and
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
  // Context parallelism: the ranks (>= 1) over which the micro-batch's sequences are split, each
  // routing its part (these `tokens`; every rank as many). Megatron counts the auxiliary losses'
  // tokens per expert over all of them and normalises by all their tokens
  // (switch_load_balancing_loss_func's and sequence_load_balancing_loss_func's
  // sequence_partition_group in megatron/core/transformer/moe/moe_utils.py), so with more than one:
  //  - moe_route writes this rank's counts into aux_counts and adds no auxiliary statistic (the
  //    counts are partial); the caller sums aux_counts over the ranks, then
  //  - moe_route with aux_from_counts adds the auxiliary statistic of this rank's tokens scored
  //    against those sums, whose sum over the ranks is the whole micro-batch's loss;
  //  - moe_route_backward reads the sums in aux_counts.
  // The normalisation is that of tokens · aux_partitions tokens in every case.
  int64_t aux_partitions = 1;
  // moe_route's second pass under aux_partitions: aux_counts is read (the counts summed over the
  // partitions), the routing outputs are left as they are, and only statistics[0] changes (the
  // auxiliary statistic added, or stored without `accumulate`).
  bool aux_from_counts = false;
  bool z_loss = false;  // compute the z-loss statistic
  // --moe-router-enable-expert-bias: [experts] fp32 in the backend's memory, added to the sigmoid
  // scores for the top-k choice only (not to the gates); null for none.
  const float* expert_bias = nullptr;
  // Sinkhorn routing (--moe-router-load-balancing-type sinkhorn, Megatron's
  // sinkhorn_load_balancing): the gates are the sigmoid (top-1) or the softmax over all experts
  // (pre_softmax, top-k), and in training moe_route chooses each token's experts by
  // choice_scores instead, [tokens, experts] fp32 in the backend's memory (Backend::moe_sinkhorn
  // of the logits). moe_route_backward then reads the choice from the routing map, which without
  // a capacity is the choice.
  bool sinkhorn = false;
  const float* choice_scores = nullptr;  // null: choose by the scores (evaluation)
};

// Backend::moe_permutation: the experts [first, first + count) of a routing map [tokens, experts];
// each expert's rows padded with empty rows to max(routed, capacity) (capacity < 0: no capacity)
// rounded up to a multiple of row_multiple.
struct MoePermutation {
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t first = 0;
  int64_t count = 0;
  int64_t topk = 1;
  int64_t capacity = -1;
  int64_t row_multiple = 1;
};

// moe_permutation's status (after the rows of each expert): what went wrong, as bits.
enum MoePermutationStatus : int64_t {
  kMoePermutationOk = 0,
  kMoePermutationTooManyExperts = 1,  // a token routed to more than topk of the experts
  kMoePermutationTooManyRows = 2,     // the rows exceed row_token's size (none written past it)
};

}  // namespace mgt
