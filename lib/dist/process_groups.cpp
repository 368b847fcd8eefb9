#include "dist/process_groups.hpp"

#include "core/error.hpp"
#include "dist/nccl_communicator.hpp"

namespace mgt::dist {

Communicator* ProcessGroups::find(GroupKind kind) const {
  switch (kind) {
    case GroupKind::TensorModelParallel: return tensor_model_parallel.get();
    case GroupKind::DataParallel: return data_parallel.get();
    case GroupKind::PipelineModelParallel: return pipeline_model_parallel.get();
    case GroupKind::ModelParallel: return model_parallel.get();
    case GroupKind::Embedding: return embedding.get();
    case GroupKind::ContextParallel: return context_parallel.get();
    case GroupKind::DataParallelWithContext: return data_parallel_with_context.get();
    case GroupKind::ExpertModelParallel: return expert_model_parallel.get();
    case GroupKind::ExpertDataParallel: return expert_data_parallel.get();
    case GroupKind::ExpertTensorModelPipeline: return expert_tensor_model_pipeline.get();
    case GroupKind::ExpertTensorParallel: return nullptr;  // listed by the layout, not used to communicate
    case GroupKind::ExpertTensorAndModelParallel: return expert_tensor_and_model_parallel.get();
  }
  return nullptr;
}

Communicator& ProcessGroups::get(GroupKind kind) const {
  Communicator* comm = find(kind);
  if (!comm)
    throw Error(std::string("this rank is not in any ") + group_kind_name(kind) + " group");
  return *comm;
}

ProcessGroups make_process_groups(DistributedRuntime& runtime, const ParallelLayout& layout,
                                  MemoryMover* mover) {
  if (layout.world_size() != runtime.world_size())
    throw Error("a parallel layout for a world of " + std::to_string(layout.world_size()) +
                " ranks used in a world of " + std::to_string(runtime.world_size()));
  // Every rank creates the groups in the same order: each split is collective over the world.
  const auto make = [&](GroupKind kind) {
    return runtime.split(group_kind_name(kind), layout.groups(kind), mover);
  };
  ProcessGroups groups;
  groups.tensor_model_parallel = make(GroupKind::TensorModelParallel);
  groups.data_parallel = make(GroupKind::DataParallel);
  groups.pipeline_model_parallel = make(GroupKind::PipelineModelParallel);
  groups.model_parallel = make(GroupKind::ModelParallel);
  groups.embedding = make(GroupKind::Embedding);
  groups.context_parallel = make(GroupKind::ContextParallel);
  groups.data_parallel_with_context = make(GroupKind::DataParallelWithContext);
  groups.expert_model_parallel = make(GroupKind::ExpertModelParallel);
  groups.expert_data_parallel = make(GroupKind::ExpertDataParallel);
  groups.expert_tensor_model_pipeline = make(GroupKind::ExpertTensorModelPipeline);
  // Only where the experts have expert-tensor-parallel ranks of their own (the layout is the same
  // on every rank, so all of them split or none).
  if (layout.expert_tensor_parallel_size() > 1 &&
      layout.expert_tensor_parallel_size() != layout.tensor_model_parallel_size())
    groups.expert_tensor_and_model_parallel = make(GroupKind::ExpertTensorAndModelParallel);
  return groups;
}

DataParallelCollectives parse_data_parallel_collectives(const std::string& value) {
  if (value == "copy-engines") return DataParallelCollectives::kCopyEngines;
  if (value == "nccl") return DataParallelCollectives::kNccl;
  throw UsageError("--dp-collectives: expected copy-engines or nccl, got '" + value + "'");
}

ProcessGroups make_nccl_process_groups(const ProcessGroups& bootstrap, const DeviceQueue& queue,
                                       const CommunicationOptions& options) {
  // Same order on every rank, as for the MPI groups: each creation is collective over its group.
  const auto mirror = [&](const std::unique_ptr<Communicator>& group, bool peer_copies = true) {
    return group ? make_nccl_communicator(*group, queue, {peer_copies, options.node_of_world_rank}) : nullptr;
  };
  ProcessGroups groups;
  groups.tensor_model_parallel = mirror(bootstrap.tensor_model_parallel);
  groups.data_parallel =
      mirror(bootstrap.data_parallel, options.data_parallel == DataParallelCollectives::kCopyEngines);
  groups.pipeline_model_parallel = mirror(bootstrap.pipeline_model_parallel);
  groups.model_parallel = mirror(bootstrap.model_parallel);
  groups.embedding = mirror(bootstrap.embedding);
  groups.context_parallel = mirror(bootstrap.context_parallel);
  groups.data_parallel_with_context = mirror(
      bootstrap.data_parallel_with_context, options.data_parallel == DataParallelCollectives::kCopyEngines);
  groups.expert_model_parallel = mirror(bootstrap.expert_model_parallel, false);
  groups.expert_data_parallel = mirror(
      bootstrap.expert_data_parallel, options.data_parallel == DataParallelCollectives::kCopyEngines);
  groups.expert_tensor_model_pipeline = mirror(bootstrap.expert_tensor_model_pipeline);
  groups.expert_tensor_and_model_parallel = mirror(bootstrap.expert_tensor_and_model_parallel, false);
  return groups;
}

}  // namespace mgt::dist
