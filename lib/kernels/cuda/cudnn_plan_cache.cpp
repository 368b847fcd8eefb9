#include "kernels/cuda/cudnn_plan_cache.hpp"

#if defined(MGT_HAVE_CUDNN)

#include <string>

#include "core/error.hpp"
#include "core/log.hpp"

namespace mgt::cuda::cudnn {

// The first engine configuration cuDNN's heuristics offer that finalises for the graph.
std::unique_ptr<Plan> build_plan(cudnnHandle_t handle, const PlanKey& key) {
  auto plan = std::make_unique<Plan>();
  plan->key = key;
  GraphBuilder g;
  if (key.backward) {
    build_backward(g, key);
  } else {
    build_forward(g, key);
  }
  Descriptor graph = g.finish(handle, plan->parts);

  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A);
  heuristics.finalize();
  int64_t count = 0;
  MGT_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0) {
    MGT_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                             raw.data()));
  }
  std::string refusal = "no engine configuration offered";
  for (int64_t i = 0; i < returned; ++i) {
    Descriptor candidate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    candidate.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle);
    candidate.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]);
    const cudnnStatus_t status = cudnnBackendFinalize(candidate.get());
    if (status != CUDNN_STATUS_SUCCESS) {
      refusal = std::to_string(returned) + " engine configurations refused, the last with " +
                cudnn_status_text(status);
      continue;
    }
    int64_t elements = 0;
    MGT_CUDNN_CHECK(cudnnBackendGetAttribute(candidate.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &elements, &plan->workspace));
    plan->plan = std::move(candidate);
    plan->parts.push_back(std::move(graph));
    plan->parts.push_back(std::move(configs[static_cast<size_t>(i)]));
    return plan;
  }
  throw Error("cuDNN attention: no engine runs the " + key.describe() + " graph (" + refusal + ")");
}

const Plan* PlanCache::plan_for(cudnnHandle_t handle, const PlanKey& key) {
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    std::unique_ptr<Plan> plan;
    try {
      plan = build_plan(handle, key);
    } catch (const Error& e) {
      log::warn(std::string(e.what()) + "; the fp32 attention kernel runs it instead");
    }
    it = plans_.emplace(key, std::move(plan)).first;
  }
  return it->second.get();
}

void execute_plan(cudnnHandle_t handle, const Plan& plan,
                  std::initializer_list<std::pair<int64_t, const void*>> bindings, void* workspace) {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, pointer] : bindings) {
    if (uid == kMaskValue && !plan.key.causal) continue;  // an unmasked graph has no mask value
    uids.push_back(uid);
    pointers.push_back(const_cast<void*>(pointer));
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(pointers.size()), pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace);
  pack.finalize();
  MGT_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan.get(), pack.get()));
}

}  // namespace mgt::cuda::cudnn

#endif  // MGT_HAVE_CUDNN
