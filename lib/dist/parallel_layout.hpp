// The rank topology: how the world's ranks split into tensor-, data- and pipeline-parallel groups,
// in Megatron's rank order. Pure arithmetic, no communication, so it can be checked anywhere.
//
// Megatron (megatron/core/parallel_state.py, initialize_model_parallel with its default
// order "tp-cp-ep-dp-pp") numbers a rank as
//     rank = tp_rank + tp·(cp_rank + cp·(ep_rank + ep·(dp_rank + dp·pp_rank)))
// tensor parallel fastest, pipeline parallel slowest. mgt has no expert parallelism (size 1),
// so this is rank = tp_rank + tp·(cp_rank + cp·(dp_rank + dp·pp_rank)). For world 8, TP 2, PP 2:
//     tensor-parallel groups   [0,1] [2,3] [4,5] [6,7]
//     data-parallel groups     [0,2] [1,3] [4,6] [5,7]
//     pipeline-parallel groups [0,4] [1,5] [2,6] [3,7]
//     model-parallel groups    [0,1,4,5] [2,3,6,7]   (tensor × pipeline)
//     embedding groups         first and last stage of each pipeline group
// With context parallelism (world 8, TP 2, CP 2): context-parallel groups [0,2] [1,3] [4,6] [5,7],
// data-parallel groups [0,4] [1,5] [2,6] [3,7], and the data-parallel groups with context
// parallelism (Megatron's "dp-cp": the gradients' reduction and the distributed optimizer's
// shards) [0,2,4,6] [1,3,5,7].
// Expert parallelism (--expert-model-parallel-size) lays the same world out a second time, as
// parallel_state's expert_decoder_rank_generator does: expert-tensor · ep · expert-dp · pp (no cp),
// expert-dp = world / (expert-tensor · ep · pp). With the expert-tensor size equal to the tensor
// size (Megatron's default) the expert-parallel groups are carved from the dp-cp ranks of one
// tensor-parallel rank; world 4, EP 2: expert-model-parallel groups [0,1] [2,3],
// expert-data-parallel groups [0,2] [1,3]. With --expert-tensor-parallel-size 1 they cut across
// the dense tensor-parallel groups: world 4, TP 2, EP 2: expert-model-parallel groups [0,1] [2,3]
// (the dense tensor-parallel pairs), expert-data-parallel groups [0,2] [1,3]. Any other
// expert-tensor size that tiles the world with EP and PP lays it out the same way; world 4, TP 1,
// expert-tensor 2, EP 2: expert-tensor-parallel groups [0,1] [2,3], expert-model-parallel groups
// [0,2] [1,3], expert tensor-and-model groups [0,1,2,3], expert-data-parallel groups [0] [1] [2] [3].
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mgt::dist {

// Megatron's flags for the decomposition, with Megatron's defaults.
struct ParallelFlags {
  std::int64_t tensor_model_parallel_size = 1;    // --tensor-model-parallel-size
  std::int64_t pipeline_model_parallel_size = 1;  // --pipeline-model-parallel-size
  std::int64_t distributed_timeout_minutes = 10;  // --distributed-timeout-minutes
  std::int64_t context_parallel_size = 1;         // --context-parallel-size
  std::int64_t expert_model_parallel_size = 1;    // --expert-model-parallel-size
  std::int64_t expert_tensor_parallel_size = 0;   // --expert-tensor-parallel-size; 0: the tensor size

  // The collective watchdog's limit: --distributed-timeout-minutes as a duration.
  std::chrono::milliseconds distributed_timeout() const;
};

// Throws a usage error naming the flag when a value is not positive.
void validate_parallel_flags(const ParallelFlags& flags);

// A rank's position along each parallel dimension.
struct RankCoordinates {
  int tensor = 0;    // rank within its tensor-parallel group
  int data = 0;      // rank within its data-parallel group
  int pipeline = 0;  // pipeline stage
  int context = 0;   // rank within its context-parallel group
};

// The kinds of process group Megatron builds that mgt uses.
enum class GroupKind {
  TensorModelParallel,    // "tp"
  DataParallel,           // "dp"
  PipelineModelParallel,  // "pp"
  ModelParallel,          // "tp-pp": one model replica
  Embedding,              // first and last pipeline stage (tied word embeddings)
  ContextParallel,        // "cp"
  DataParallelWithContext,  // "dp-cp": the gradients' reduction, the distributed optimizer
  // Megatron's expert rank generator (order "tp-cp-ep-dp-pp" over expert-tensor × ep × expert-dp
  // × pp): the experts' ranks.
  ExpertModelParallel,  // "ep": the ranks that share out the experts (token all-to-all)
  ExpertDataParallel,   // expert "dp": the replicas of the same experts (their gradients' reduction)
  // expert "tp-ep-pp": one copy of every expert's weights (the experts' norms)
  ExpertTensorModelPipeline,
  ExpertTensorParallel,  // expert "tp": the ranks that split each expert's weights
  // expert "tp-ep": the ranks the tokens travel between when the expert-tensor size is neither 1
  // nor the tensor size (Megatron's tp_ep_group of its token dispatchers)
  ExpertTensorAndModelParallel,
};

// "tensor-model-parallel", "data-parallel", ... for messages.
const char* group_kind_name(GroupKind kind);

class ParallelLayout {
public:
  // Checks the flags against the world size; errors name the flag at fault.
  ParallelLayout(const ParallelFlags& flags, int world_size);

  int world_size() const { return world_size_; }
  int tensor_model_parallel_size() const { return tp_; }
  int pipeline_model_parallel_size() const { return pp_; }
  int data_parallel_size() const { return dp_; }
  int context_parallel_size() const { return cp_; }
  int expert_model_parallel_size() const { return ep_; }
  int expert_tensor_parallel_size() const { return etp_; }
  // world / (expert-tensor · ep · pp): the ranks holding the same experts.
  int expert_data_parallel_size() const { return world_size_ / (etp_ * ep_ * pp_); }
  // Whether the experts need groups of their own: expert parallelism, or an expert-tensor size
  // other than 1 and the tensor size (with 1 and no expert parallelism each rank's experts are
  // whole and their gradients summed as sequence-parallel ones; with the tensor size they are
  // split as the dense layers).
  bool separate_expert_grid() const { return ep_ > 1 || (etp_ > 1 && etp_ != tp_); }

  RankCoordinates coordinates(int rank) const;
  int rank_of(const RankCoordinates& c) const;

  // Every group of a kind, each listing world ranks in group-rank order, in Megatron's order
  // (the order of parallel_state's RankGenerator.get_ranks). A rank's position in its group's
  // list is its rank in that group. Embedding groups hold one rank when there is one stage.
  std::vector<std::vector<int>> groups(GroupKind kind) const;

  // The group of `kind` that holds `rank`; empty when the rank is in none (embedding groups).
  std::vector<int> group_of(GroupKind kind, int rank) const;

private:
  int world_size_;
  int tp_;
  int pp_;
  int dp_;
  int cp_ = 1;
  int ep_ = 1;
  int etp_ = 1;
};

// Megatron's generate_masked_orthogonal_rank_groups: the ranks of a world laid out as a grid of
// `sizes` (fastest-varying first), grouped along the dimensions where `mask` is true.
std::vector<std::vector<int>> orthogonal_rank_groups(int world_size, const std::vector<int>& sizes,
                                                     const std::vector<bool>& mask);

// "[0, 2, 4]" for messages and tests.
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace mgt::dist
