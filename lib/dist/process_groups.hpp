// The communicators of one rank for a parallel layout: its tensor-, data- and pipeline-parallel
// groups, its model-parallel group (one model replica) and, on the first and last pipeline
// stages, the embedding group — Megatron's parallel_state groups (see parallel_layout.hpp).
#pragma once
#include <memory>

#include "dist/communicator.hpp"
#include "dist/distributed_runtime.hpp"
#include "dist/memory_mover.hpp"
#include "dist/parallel_layout.hpp"

namespace mgt::dist {

struct ProcessGroups {
  std::unique_ptr<Communicator> tensor_model_parallel;
  std::unique_ptr<Communicator> data_parallel;
  std::unique_ptr<Communicator> pipeline_model_parallel;
  std::unique_ptr<Communicator> model_parallel;
  // Null on ranks that are neither the first nor the last pipeline stage.
  std::unique_ptr<Communicator> embedding;
  std::unique_ptr<Communicator> context_parallel;
  std::unique_ptr<Communicator> data_parallel_with_context;
  // The experts' groups (one rank each without expert parallelism).
  std::unique_ptr<Communicator> expert_model_parallel;
  std::unique_ptr<Communicator> expert_data_parallel;
  std::unique_ptr<Communicator> expert_tensor_model_pipeline;
  // Megatron's expert "tp-ep" group, only with an expert-tensor-parallel size other than 1 and the
  // tensor-parallel size (ParallelLayout::separate_expert_grid); null otherwise.
  std::unique_ptr<Communicator> expert_tensor_and_model_parallel;

  Communicator& get(GroupKind kind) const;
  // Null for the embedding group of a middle stage, the expert tensor-and-model-parallel group
  // where there is none, and the expert-tensor-parallel group (listed by the layout only).
  Communicator* find(GroupKind kind) const;
};

// Collective over the world. `layout` must be for runtime.world_size(); `mover` (may be null)
// stages device buffers for MPI and must outlive the groups.
ProcessGroups make_process_groups(DistributedRuntime& runtime, const ParallelLayout& layout,
                                  MemoryMover* mover = nullptr);

}  // namespace mgt::dist
