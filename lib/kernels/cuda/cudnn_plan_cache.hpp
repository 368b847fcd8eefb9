// Execution plans of the attention graphs (cudnn_attention_graphs.hpp): built once per PlanKey with
// the first engine configuration cuDNN's heuristics offer that finalises, kept for the handle's
// life, and launched with a variant pack. Included only by code built with cuDNN (MGT_HAVE_CUDNN).
#pragma once
#include <cudnn_graph.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cuda/cudnn_attention_graphs.hpp"
#include "kernels/cuda/cudnn_graph_builder.hpp"

namespace mgt::cuda::cudnn {

struct Plan {
  PlanKey key;
  std::vector<Descriptor> parts;  // everything the plan refers to, kept alive with it
  Descriptor plan;
  int64_t workspace = 0;
};

// The plan of `key`'s graph; throws mgt::Error when no engine runs it.
std::unique_ptr<Plan> build_plan(cudnnHandle_t handle, const PlanKey& key);

// The plans of one cuDNN handle, built on first use. A key without an engine is reported once
// (a warning) and remembered as such, so that later calls fall back at once.
class PlanCache {
public:
  // The plan of `key`, built with `handle` the first time; null: no engine runs it.
  const Plan* plan_for(cudnnHandle_t handle, const PlanKey& key);
  // Destroys the plans (before their handle is).
  void clear() { plans_.clear(); }

private:
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;  // null: no engine for the key (reported once)
};

// Launches `plan` on the handle's stream with the tensors of `bindings` (uid, address) and the
// plan's workspace.
void execute_plan(cudnnHandle_t handle, const Plan& plan,
                  std::initializer_list<std::pair<int64_t, const void*>> bindings, void* workspace);

}  // namespace mgt::cuda::cudnn
