// The buffers of one MoE layer's forward and backward for one micro-batch (model/moe_layer.hpp):
// what the backward reads (MoeActivations) and what it only needs while it runs (MoeScratch),
// with their sizes. Expert rows are tokens permuted by expert; with a capacity, each expert's
// rows are at most its capacity (exactly that, zero rows padding them, with
// --moe-pad-expert-input-to-capacity).
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/gpt_config.hpp"

namespace mgt {

struct MoeActivations {
  FloatView logits;       // [T, E] router logits (fp32)
  FloatView probs;        // [T, E] routing probabilities after the capacity (fp32)
  FloatView routing_map;  // [T, E] 1 where token t goes to expert e (fp32)
  FloatView aux_counts;   // [aux groups, E] the auxiliary loss's tokens per expert (fp32)
  IndexView row_token;    // [max rows] token of each expert row, −1 for padding
  IndexView row_slot;     // [max rows] t·E + e of each expert row, −1 for padding
  IndexView token_rows;   // [T, topk] expert rows of each token, −1 where fewer (dropped)
  IndexView slot_row;     // [T·E] expert row of (t, e), −1 where not routed
  IndexView expert_rows;  // [E + 1] rows of each expert (padding included), then moe_permutation's status
  FloatView row_weights;  // [max rows] probability of each row's (token, expert) (fp32)
  FloatView permuted;     // [max rows, h] this rank's tokens by expert
  // With expert parallelism (model/moe_token_dispatcher.hpp), what the local experts run on:
  IndexView ep_counts;    // [ranks, local experts] rows each rank sent to each local expert
  // With expert-tensor-parallel replicas (MoeConfig::expert_row_replicas > 1): the row of each
  // row as sent, and the places of each row's copies ([rows, replicas]).
  IndexView ep_replicate;  // [replicas · max rows]
  IndexView ep_combine;    // [max rows · replicas]
  IndexView ep_sort;      // [expert rows] received row of each row in local-expert order
  IndexView ep_unsort;    // [expert rows] local-expert-order row of each received row
  FloatView expert_input;       // [expert rows, h] the local experts' input (permuted without EP)
  FloatView fc1_output;   // [expert rows, fc1 of an expert]
  FloatView activation_output;  // [expert rows, expert ffn]
  FloatView expert_output;      // [max rows, h] the experts' output for this rank's rows
  FloatView shared_fc1_output;         // [T, shared fc1] (shared experts only)
  FloatView shared_activation_output;  // [T, shared ffn]
  // --moe-shared-expert-gate only: the gate's logits, its sigmoid (routed as one expert of top-1
  // sigmoid routing, model/moe_layer.cpp) and that routing's map, and the shared experts' output
  // before the gate scales it.
  FloatView shared_gate_logits;  // [T] (fp32)
  FloatView shared_gate;         // [T] (fp32)
  FloatView shared_gate_map;     // [T] (fp32)
  FloatView shared_ungated;      // [T, h]
};

struct MoeScratch {
  FloatView gates;          // [T, E] (fp32)
  FloatView shared_output;  // [T, h] (shared experts only)
  FloatView d_probs;        // [T, E] (fp32)
  FloatView d_logits;       // [T, E] (fp32)
  FloatView d_row_weights;  // [max rows] (fp32)
  FloatView d_rows;         // [max rows, h]
  FloatView d_activation;   // [expert rows, expert ffn] (also the shared experts' [T, shared ffn])
  FloatView d_fc1;          // [expert rows, fc1 of an expert] (also the shared experts')
  FloatView d_permuted;     // [max rows, h]
  FloatView d_hidden;       // [T, h]
  // With expert parallelism: the rows as exchanged (in source-rank order), the local experts'
  // output (or the gradient of it) in local-expert order, and the gradient of their input.
  FloatView ep_exchange;    // [expert rows, h]
  FloatView ep_sorted;      // [expert rows, h]
  FloatView ep_d_input;     // [expert rows, h] (training)
  // With expert-tensor-parallel replicas: the rows as sent (each once per replica), then the
  // slices' partial outputs (or input gradients) as they come back.
  FloatView ep_copies;      // [replicas · max rows, h]
  // Under sequence parallelism (MoeConfig::sequence_parallel_size), the whole sequence's output before
  // its reduce-scatter (forward) or input gradient before it (backward), and the all-gathered
  // output gradient (backward).
  FloatView sp_whole;       // [T, h]
  FloatView sp_d_output;    // [T, h] (training)
  // The allgather dispatcher under expert parallelism (MoeBufferSizes::gathers): the expert-
  // parallel group's tokens (then their outputs; in the backward the output gradient, then the
  // input gradient), routing probabilities (the backward: their gradient) and routing maps,
  // gathered.
  FloatView ag_tokens;      // [exchange ranks · T, h]
  FloatView ag_probs;       // [exchange ranks · T, E] (fp32)
  FloatView ag_map;         // [exchange ranks · T, E] (fp32)
};

struct MoeBufferSizes {
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t topk = 0;
  int64_t hidden = 0;
  int64_t max_rows = 0;
  int64_t fc1 = 0;  // of an expert: ffn, 2·ffn with SwiGLU
  int64_t ffn = 0;
  int64_t shared_fc1 = 0;
  int64_t shared_ffn = 0;
  bool shared_gate = false;  // --moe-shared-expert-gate
  int64_t aux_groups = 0;  // the batch for seq_aux_loss, else 1
  int64_t ep = 1;           // expert-parallel ranks (MoeConfig::expert_model_parallel_size)
  int64_t replicas = 1;     // expert-tensor-parallel ranks per row (MoeConfig::expert_row_replicas)
  // The ranks the tokens travel between: ep · replicas.
  int64_t exchange_ranks() const { return ep * replicas; }
  bool sequence_parallel = false;  // MoeConfig::sequence_parallel_size > 1
  // The allgather dispatcher over more than one rank: the experts run on the exchange ranks'
  // gathered tokens.
  bool gathers = false;
  // Tokens the dispatch permutes: tokens, or exchange_ranks() · tokens when it gathers.
  int64_t dispatch_tokens = 0;
  // Rows the local experts may receive: max_rows without expert parallelism, else each rank's
  // most for the local experts (every token to min(topk, local experts) of them, at most their
  // capacities) times ep.
  int64_t expert_rows = 0;

  int64_t activation_floats() const;
  int64_t activation_indices() const;
  int64_t scratch_floats() const;
};

// The capacity of each expert for `tokens` tokens (< 0: dropless).
int64_t moe_capacity(const MoeConfig& moe, int64_t tokens);
// The most rows each expert takes of `tokens` tokens routed in `shards` equal parts (the
// sequence-parallel ranks', each with its own capacity): shards · moe_capacity(tokens / shards)
// (< 0: dropless).
int64_t moe_row_capacity(const MoeConfig& moe, int64_t tokens, int64_t shards);
MoeBufferSizes moe_buffer_sizes(const GptConfig& config, int64_t seq, int64_t batch);
// The multiple each expert's rows are padded to with zero rows (moe_token_dispatcher.hpp): 16
// under FP8 training, whose cuBLASLt GEMMs need every dimension a multiple of 16 (Megatron's
// experts pad so too: SequentialMLP's _pad_tensor_for_fp8 and TEGroupedMLP's Fp8Padding in
// megatron/core/transformer/moe/experts.py, get_fp8_align_size in megatron/core/fp8_utils.py);
// else 1.
int64_t moe_expert_row_multiple(const GptConfig& config);

// Buffers a test or a caller without an ActivationMemory owns.
class MoeBuffers {
public:
  MoeBuffers(Backend& backend, const MoeBufferSizes& sizes, bool training);
  const MoeActivations& activations() const { return activations_; }
  const MoeScratch& scratch() const { return scratch_; }

private:
  DeviceBuffer floats_;
  DeviceArray<int64_t> indices_;
  MoeActivations activations_;
  MoeScratch scratch_;
};

// Carves the buffers from `take` (floats of the activation type), `take_fp32` and `take_index`;
// the experts' activation output is `shared_activation_output` where given (--recompute-modules
// moe_act: one for all layers).
template <typename TakeFloat, typename TakeFp32, typename TakeIndex>
MoeActivations take_moe_activations(const MoeBufferSizes& s, TakeFloat take, TakeFp32 take_fp32, TakeIndex take_index,
                                    FloatView shared_activation_output = {}) {
  MoeActivations a;
  const int64_t te = s.tokens * s.experts;
  a.logits = take_fp32(te);
  a.probs = take_fp32(te);
  a.routing_map = take_fp32(te);
  a.aux_counts = take_fp32(s.aux_groups * s.experts);
  a.row_token = take_index(s.max_rows);
  a.row_slot = take_index(s.max_rows);
  a.token_rows = take_index(s.dispatch_tokens * s.topk);
  a.slot_row = take_index(s.dispatch_tokens * s.experts);
  a.expert_rows = take_index(s.experts + 1);
  a.row_weights = take_fp32(s.max_rows);
  a.permuted = take(s.max_rows * s.hidden);
  if (s.exchange_ranks() > 1 && !s.gathers) {
    a.ep_counts = take_index(s.replicas * s.experts);
    a.ep_sort = take_index(s.expert_rows);
    a.ep_unsort = take_index(s.expert_rows);
    if (s.replicas > 1) {
      a.ep_replicate = take_index(s.replicas * s.max_rows);
      a.ep_combine = take_index(s.replicas * s.max_rows);
    }
    a.expert_input = take(s.expert_rows * s.hidden);
  } else {
    a.expert_input = a.permuted;
  }
  a.fc1_output = take(s.expert_rows * s.fc1);
  a.activation_output = shared_activation_output.empty() ? take(s.expert_rows * s.ffn) : shared_activation_output;
  a.expert_output = take(s.max_rows * s.hidden);
  a.shared_fc1_output = take(s.tokens * s.shared_fc1);
  a.shared_activation_output = take(s.tokens * s.shared_ffn);
  if (s.shared_gate) {
    a.shared_gate_logits = take_fp32(s.tokens);
    a.shared_gate = take_fp32(s.tokens);
    a.shared_gate_map = take_fp32(s.tokens);
    a.shared_ungated = take(s.tokens * s.hidden);
  }
  return a;
}

template <typename TakeFloat, typename TakeFp32>
MoeScratch take_moe_scratch(const MoeBufferSizes& s, TakeFloat take, TakeFp32 take_fp32, bool training) {
  MoeScratch x;
  const int64_t te = s.tokens * s.experts;
  x.gates = take_fp32(te);
  x.shared_output = take(s.shared_ffn > 0 ? s.tokens * s.hidden : 0);
  if (s.exchange_ranks() > 1 && !s.gathers) {
    x.ep_exchange = take(s.expert_rows * s.hidden);
    x.ep_sorted = take(s.expert_rows * s.hidden);
    if (s.replicas > 1) x.ep_copies = take(s.replicas * s.max_rows * s.hidden);
  }
  if (s.gathers) {
    x.ag_tokens = take(s.dispatch_tokens * s.hidden);
    x.ag_probs = take_fp32(s.dispatch_tokens * s.experts);
    x.ag_map = take_fp32(s.dispatch_tokens * s.experts);
  }
  if (s.sequence_parallel) x.sp_whole = take(s.tokens * s.hidden);
  if (!training) return x;
  x.d_probs = take_fp32(te);
  x.d_logits = take_fp32(te);
  x.d_row_weights = take_fp32(s.max_rows);
  x.d_rows = take(s.max_rows * s.hidden);
  const int64_t activation = std::max(s.expert_rows * s.ffn, s.tokens * s.shared_ffn);
  const int64_t fc1 = std::max(s.expert_rows * s.fc1, s.tokens * s.shared_fc1);
  x.d_activation = take(activation);
  x.d_fc1 = take(fc1);
  x.d_permuted = take(s.max_rows * s.hidden);
  x.d_hidden = take(s.tokens * s.hidden);
  if (s.exchange_ranks() > 1 && !s.gathers) x.ep_d_input = take(s.expert_rows * s.hidden);
  if (s.sequence_parallel) x.sp_d_output = take(s.tokens * s.hidden);
  return x;
}

}  // namespace mgt
