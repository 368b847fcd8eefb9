// Context parallelism's core attention over the ring of context-parallel ranks ("p2p", Megatron's
// default --cp-comm-type), as TransformerEngine's AttnFuncWithCPAndKVP2P computes it
// (transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py).
//
// Each of the N ranks holds two of the sequence's 2N chunks (context_parallel_split.hpp): rank i
// chunks i and 2N−1−i, concatenated, c tokens each. Its queries, keys and values are those 2c
// positions. The key/value chunks travel around the ring (rank i sends to i+1 and receives from
// i−1), and at step s rank i holds the keys and values of rank j = i − s (mod N):
//   s = 0      its own: the causal attention of its 2c queries over its 2c keys (the two chunks
//              in sequence order, so the usual causal mask is the right one);
//   j < i      chunk j lies before both of rank i's chunks and chunk 2N−1−j after both: all 2c
//              queries attend, unmasked, to the first half of the keys;
//   j > i      both of rank j's chunks lie before chunk 2N−1−i and after chunk i: the second
//              half of the queries attends, unmasked, to all 2c keys; the first half skips it.
// Without the causal mask every step attends all queries to all keys. Each step's partial
// output is merged into the running one by its log-sum-exp (Backend::attention_merge), so the
// result is the attention over the whole sequence, with its log-sum-exp for the backward.
//
// The backward passes the keys and values around the ring again, with their gradients: at each
// step rank i computes its queries' contribution to the gradients of the keys and values in
// hand (the attention backward with the final output and log-sum-exp, which gives each block's
// exact share), adds it to the gradient that arrived with them, and passes both on; after N
// steps each rank's key/value gradient is complete and one more hop brings it home.
//
// Attention dropout: each step draws its own mask (the key offset numbers the rank and the
// step), and its backward redraws it; the masks are not those of the unsplit sequence.
#pragma once
#include <cstdint>

#include "model/context_parallel_attention.hpp"

namespace mgt {

class RingAttention final : public ContextParallelAttention {
public:
  // `group`: the context-parallel group (a group of one attends alone).
  RingAttention(Backend& backend, dist::Communicator& group);

  // The scratch elements forward and backward allocate for one layer's attention of `shape`
  // (this rank's 2c tokens), kept between calls and shared by all layers: what the memory
  // estimate counts. Sizes in elements of the activations' type, lse parts included.
  static int64_t scratch_elements(const AttentionShape& shape);

  // lse [b, heads, 2c].
  void forward(ConstFloatView q, ConstFloatView k, ConstFloatView v, const AttentionShape& shape,
               const AttentionParams& params, FloatView out, FloatView lse) override;
  void backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out, ConstFloatView dout,
                ConstFloatView lse, const AttentionShape& shape, const AttentionParams& params, FloatView dq,
                FloatView dk, FloatView dv) override;

private:
  // Which part of the keys in hand a step attends to (see the top of this file).
  enum class Block { kDiagonal, kEarlier, kLater, kFull };
  Block block(int step, const AttentionParams& params) const;
  AttentionParams step_params(const AttentionParams& params, const AttentionShape& shape, int step) const;
};

}  // namespace mgt
