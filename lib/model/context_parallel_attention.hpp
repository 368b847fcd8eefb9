// The core attention of a context-parallel layer: each of the group's ranks holds two of the
// sequence's 2N chunks (context_parallel_split.hpp: rank i chunks i and 2N−1−i, concatenated)
// of the queries, keys and values, and gets the attention of its queries over the whole sequence.
// Megatron's --cp-comm-type names how: p2p passes the keys and values round a ring
// (ring_attention.hpp), a2a exchanges heads for sequence with all-to-alls
// (head_scatter_attention.hpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dist/communicator.hpp"
#include "kernels/backend.hpp"

namespace mgt {

// --cp-comm-type: p2p (the ring) or a2a (all-to-all).
enum class CpCommType { kP2p, kA2a };
CpCommType parse_cp_comm_type(std::string_view text);  // UsageError for anything else
// The type of a --cp-comm-type list that names one type for all layers (p2p when empty).
CpCommType parse_cp_comm_types(const std::vector<std::string>& types);

class ContextParallelAttention {
public:
  // `group`: the context-parallel group; it and the backend must outlive this object.
  ContextParallelAttention(Backend& backend, dist::Communicator& group) : backend_(&backend), group_(&group) {}
  virtual ~ContextParallelAttention() = default;
  ContextParallelAttention(const ContextParallelAttention&) = delete;
  ContextParallelAttention& operator=(const ContextParallelAttention&) = delete;

  int size() const { return group_->size(); }
  int rank() const { return group_->rank(); }
  // The context-parallel group, for the other reductions over it (the MoE router's counts).
  dist::Communicator& group() const { return *group_; }

  // q [2c, b, heads, d], k and v [2c, b, groups, d], sequence-major: this rank's two chunks.
  // shape.seq_q == shape.seq_kv == 2c. out as q; lse b·heads·2c fp32 values, in the layout the
  // backward reads.
  virtual void forward(ConstFloatView q, ConstFloatView k, ConstFloatView v, const AttentionShape& shape,
                       const AttentionParams& params, FloatView out, FloatView lse) = 0;
  // The gradients of forward's inputs, overwritten; out and lse as forward left them.
  virtual void backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out,
                        ConstFloatView dout, ConstFloatView lse, const AttentionShape& shape,
                        const AttentionParams& params, FloatView dq, FloatView dk, FloatView dv) = 0;

protected:
  // Scratch buffer `index`, grown on demand and reused by every layer: n elements of `type`.
  FloatView scratch(std::size_t index, int64_t n, FloatType type) {
    if (scratch_.size() <= index) scratch_.resize(index + 1);
    DeviceBuffer& b = scratch_[index];
    if (b.size() < n || b.type() != type) b = DeviceBuffer(*backend_, n, type);
    return b.view().first(n);
  }

  Backend* backend_;
  dist::Communicator* group_;

private:
  std::vector<DeviceBuffer> scratch_;
};

// The attention of `type` over `group`.
std::unique_ptr<ContextParallelAttention> make_context_parallel_attention(CpCommType type, Backend& backend,
                                                                          dist::Communicator& group);
// The scratch elements the attention of `type` keeps for one layer of `shape` (this rank's tokens).
int64_t context_parallel_scratch_elements(CpCommType type, const AttentionShape& shape);

}  // namespace mgt
