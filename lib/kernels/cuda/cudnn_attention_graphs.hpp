// The fused flash-attention graphs: what a plan depends on (PlanKey), the ids of the tensors a
// call binds, and the forward and backward operation graphs (see cudnn_attention_graphs.cpp).
// Included only by code built with cuDNN (MGT_HAVE_CUDNN).
#pragma once
#include <bit>
#include <compare>
#include <cstdint>
#include <string>

#include "kernels/operation_params.hpp"
#include "kernels/cuda/cudnn_graph_builder.hpp"

namespace mgt::cuda::cudnn {

// Unique ids of the tensors a variant pack binds (below GraphBuilder::kFirstVirtual, where the
// virtual tensors' ids start).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSoftmaxSum,  // backward: Σ dO∘O per row, fp32 scratch
  kDQAccum,     // backward: dQ accumulated in fp32, scratch
  kScale,       // by value from here on
  kMaskValue,
  kOne,
  kDropoutScale,
  kDropoutKeep,
  kSeed,  // device int64
  kOffset,
};

// What a plan depends on; the scale, the dropout seed and the data are bound per call.
struct PlanKey {
  bool backward = false;
  int64_t batch = 0, seq = 0, heads = 0, groups = 0, head_dim = 0;
  // The keys' length (seq, the queries', unless the scores are unmasked) and the causal mask.
  int64_t seq_kv = 0;
  bool causal = true;
  bool batch_major = false;
  // Q, K and V inside the fused QKV projection's output (seq-major, groups == heads: per token
  // and head, q, k and v), dQ, dK and dV written there too.
  bool fused_qkv = false;
  uint32_t dropout_bits = 0;  // the dropout rate's bits: it is baked into the RNG operation
  bool half = false;          // fp16 operands (--fp16); otherwise bf16

  cudnnDataType_t io_type() const { return half ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }

  auto operator<=>(const PlanKey&) const = default;

  float dropout() const { return std::bit_cast<float>(dropout_bits); }
  std::string describe() const {
    return std::string(backward ? "backward" : "forward") + " batch " + std::to_string(batch) +
           " seq " + std::to_string(seq) + (seq_kv != seq ? " keys " + std::to_string(seq_kv) : "") +
           (causal ? " causal" : " unmasked") + " heads " + std::to_string(heads) + "/" +
           std::to_string(groups) + " head_dim " + std::to_string(head_dim) +
           (batch_major ? " batch-major" : " seq-major") + (fused_qkv ? " fused QKV" : "") +
           " dropout " + std::to_string(dropout()) +
           (half ? " fp16" : " bf16");
  }
};

// The key of a call's forward (backward = false) or backward plan: fp16 operands when `half`,
// else bf16; Q, K and V inside the fused QKV projection's output when `fused_qkv`.
PlanKey make_key(bool backward, const AttentionShape& s, const AttentionParams& p, bool half,
                 bool fused_qkv = false);

// The forward graph: O and the softmax statistics from Q, K and V (with dropout when the key has a
// rate). Binds kQ, kK, kV, kO, kStats, kScale, kMaskValue if causal (and kDropoutScale, kSeed, kOffset).
void build_forward(GraphBuilder& g, const PlanKey& key);
// The backward graph: dQ, dK and dV from Q, K, V, O, dO and the statistics, with the softmax sums
// and the fp32 dQ accumulator as scratch. Binds kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV,
// kSoftmaxSum, kDQAccum, kScale, kMaskValue (causal) and kOne (with dropout: kDropoutScale, kDropoutKeep,
// kSeed and kOffset instead of kOne).
void build_backward(GraphBuilder& g, const PlanKey& key);

}  // namespace mgt::cuda::cudnn
