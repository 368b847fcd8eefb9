#include "model/context_parallel_attention.hpp"

#include <string>

#include "core/error.hpp"
#include "model/head_scatter_attention.hpp"
#include "model/ring_attention.hpp"

namespace mgt {

CpCommType parse_cp_comm_type(std::string_view text) {
  if (text == "p2p") return CpCommType::kP2p;
  if (text == "a2a") return CpCommType::kA2a;
  throw UsageError("--cp-comm-type: expected p2p or a2a, got '" + std::string(text) + "'");
}

CpCommType parse_cp_comm_types(const std::vector<std::string>& types) {
  return types.empty() ? CpCommType::kP2p : parse_cp_comm_type(types.front());
}

std::unique_ptr<ContextParallelAttention> make_context_parallel_attention(CpCommType type, Backend& backend,
                                                                          dist::Communicator& group) {
  if (type == CpCommType::kA2a) return std::make_unique<HeadScatterAttention>(backend, group);
  return std::make_unique<RingAttention>(backend, group);
}

int64_t context_parallel_scratch_elements(CpCommType type, const AttentionShape& shape) {
  return type == CpCommType::kA2a ? HeadScatterAttention::scratch_elements(shape)
                                  : RingAttention::scratch_elements(shape);
}

}  // namespace mgt
