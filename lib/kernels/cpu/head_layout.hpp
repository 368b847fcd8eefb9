// Where a head's rows live in an attention tensor. Megatron keeps activations sequence-major,
// [s, b, heads, head_dim] (so sequence parallelism splits the outermost dimension); inference
// code often prefers batch-major [b, s, heads, head_dim]. Attention and rotary accept either, and
// address one (batch, head) pair as a strided [s, head_dim] matrix. The members are constexpr so
// that CUDA kernels share them.
#pragma once
#include <cstdint>

namespace mgt::cpu {

enum class SeqLayout {
  kSeqMajor,    // [seq, batch, heads, head_dim], Megatron's layout
  kBatchMajor,  // [batch, seq, heads, head_dim]
};

struct HeadTensor {
  int64_t seq = 0;
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  SeqLayout layout = SeqLayout::kSeqMajor;

  constexpr int64_t elements() const { return seq * batch * heads * head_dim; }

  // Offset of element (s, b, h, 0).
  constexpr int64_t offset(int64_t s, int64_t b, int64_t h) const {
    return layout == SeqLayout::kSeqMajor ? ((s * batch + b) * heads + h) * head_dim
                                          : ((b * seq + s) * heads + h) * head_dim;
  }

  // Distance between (s, b, h, 0) and (s + 1, b, h, 0).
  constexpr int64_t seq_stride() const {
    return layout == SeqLayout::kSeqMajor ? batch * heads * head_dim : heads * head_dim;
  }
};

}  // namespace mgt::cpu
