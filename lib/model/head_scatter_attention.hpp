// Context parallelism's core attention by all-to-all ("a2a" of --cp-comm-type, DeepSpeed-Ulysses
// as TransformerEngine's AttnFuncWithCPAndQKVOA2A computes it, transformer_engine/pytorch/
// attention/dot_product_attention/context_parallel.py): each of the N ranks trades its two
// chunks of every head for the whole sequence of N-th of the heads, attends that sequence
// causally in one call (the fused attention of one rank, no partial blocks to merge), and trades
// the output back. Rank r ends with query heads [r·H/N, (r+1)·H/N) and key/value groups
// [r·G/N, (r+1)·G/N) of the whole sequence, so H and G must be multiples of N.
//
// The exchanges: each tensor is regrouped by destination (its heads' slices), sent with one
// all-to-all, and the received chunks put in sequence order (chunk k of the sequence came from
// rank k, or from rank 2N−1−k as that rank's second chunk); the output and the gradients take
// the inverse path. The backward exchanges the queries, keys, values, output and its gradient
// again rather than keep the forward's exchanged copies: communication, not memory.
//
// The log-sum-exp is the whole-sequence attention's [b, H/N, N·2c]: as many values as the
// layer's lse holds, kept in that layout for the backward.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "model/context_parallel_attention.hpp"

namespace mgt {

class HeadScatterAttention final : public ContextParallelAttention {
public:
  HeadScatterAttention(Backend& backend, dist::Communicator& group);

  // The scratch elements forward and backward allocate for one layer's attention of `shape`
  // (this rank's 2c tokens), as RingAttention::scratch_elements counts them.
  static int64_t scratch_elements(const AttentionShape& shape);
  // Empty when `heads` and `groups` split evenly over `ranks`, else why not (for a usage error).
  static std::string unsupported(int64_t heads, int64_t groups, int64_t ranks);

  void forward(ConstFloatView q, ConstFloatView k, ConstFloatView v, const AttentionShape& shape,
               const AttentionParams& params, FloatView out, FloatView lse) override;
  void backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out, ConstFloatView dout,
                ConstFloatView lse, const AttentionShape& shape, const AttentionParams& params, FloatView dq,
                FloatView dk, FloatView dv) override;

private:
  // The row orders (rows of head_dim elements) of one tensor's exchanges, for 2c local tokens,
  // b sequences and `heads` heads: to_peers regroups the local [2c, b, heads] by destination
  // ([N, 2c, b, heads/N]); to_sequence puts the received [N, 2c, b, heads/N] in sequence order
  // ([N·2c, b, heads/N]); and the inverse pair for the way back.
  struct Orders {
    DeviceIndexBuffer to_peers, to_sequence, from_sequence, from_peers;
  };
  const Orders& orders(int64_t local_seq, int64_t batch, int64_t heads);
  // out = in's rows in the order `after` gives them, once rows in the order `before` gives them
  // went by one all-to-all of equal parts (rows of head_dim elements).
  void exchange(ConstFloatView in, ConstIndexView before, ConstIndexView after, int64_t head_dim, FloatView out);
  // x (local, `heads` heads) → whole (whole sequence, heads/N heads), through the all-to-all.
  void gather_sequence(ConstFloatView x, int64_t local_seq, int64_t batch, int64_t heads, int64_t head_dim,
                       FloatView whole);
  // The inverse: whole → x.
  void scatter_sequence(ConstFloatView whole, int64_t local_seq, int64_t batch, int64_t heads, int64_t head_dim,
                        FloatView x);
  // The whole-sequence attention's shape and this rank's heads' dropout numbering.
  AttentionShape whole_shape(const AttentionShape& shape) const;
  AttentionParams whole_params(const AttentionParams& params, const AttentionShape& shape) const;

  std::map<std::tuple<int64_t, int64_t, int64_t>, Orders> orders_;
};

}  // namespace mgt
