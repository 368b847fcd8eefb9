#include "dist/parallel_layout.hpp"

#include <limits>

#include "core/error.hpp"

namespace mgt::dist {
namespace {

// The dimensions of Megatron's default order "tp-cp-ep-dp-pp"; the expert parallel size is 1 in
// the dense grid (EP is carved from dp · cp in the expert grid), as in parallel_state.
enum Dim { kTp = 0, kCp, kEp, kDp, kPp, kDims };

void require_positive(const char* flag, std::int64_t value) {
  if (value < 1)
    throw UsageError(std::string(flag) + " must be a positive integer, not " +
                     std::to_string(value));
}

// Megatron's decompose(): the grid index of `index` for a grid of `shape`.
std::vector<int> decompose(int index, const std::vector<int>& shape) {
  std::vector<int> idx(shape.size());
  int stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    idx[i] = (index / stride) % shape[i];
    stride *= shape[i];
  }
  return idx;
}

int inner_product(const std::vector<int>& a, const std::vector<int>& b) {
  int sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

std::chrono::milliseconds ParallelFlags::distributed_timeout() const {
  return std::chrono::minutes(distributed_timeout_minutes);
}

void validate_parallel_flags(const ParallelFlags& flags) {
  require_positive("--tensor-model-parallel-size", flags.tensor_model_parallel_size);
  require_positive("--pipeline-model-parallel-size", flags.pipeline_model_parallel_size);
  require_positive("--distributed-timeout-minutes", flags.distributed_timeout_minutes);
  require_positive("--context-parallel-size", flags.context_parallel_size);
  require_positive("--expert-model-parallel-size", flags.expert_model_parallel_size);
  if (flags.expert_tensor_parallel_size != 0)  // 0: unset, the tensor-parallel size
    require_positive("--expert-tensor-parallel-size", flags.expert_tensor_parallel_size);
  // Minutes beyond this overflow the watchdog's millisecond clock arithmetic.
  constexpr std::int64_t kMaxMinutes = std::numeric_limits<std::int32_t>::max() / 60;
  if (flags.distributed_timeout_minutes > kMaxMinutes)
    throw UsageError("--distributed-timeout-minutes " +
                     std::to_string(flags.distributed_timeout_minutes) + " is too large (at most " +
                     std::to_string(kMaxMinutes) + ")");
}

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::TensorModelParallel: return "tensor-model-parallel";
    case GroupKind::DataParallel: return "data-parallel";
    case GroupKind::PipelineModelParallel: return "pipeline-model-parallel";
    case GroupKind::ModelParallel: return "model-parallel";
    case GroupKind::Embedding: return "embedding";
    case GroupKind::ContextParallel: return "context-parallel";
    case GroupKind::DataParallelWithContext: return "data-parallel-with-context";
    case GroupKind::ExpertModelParallel: return "expert-model-parallel";
    case GroupKind::ExpertDataParallel: return "expert-data-parallel";
    case GroupKind::ExpertTensorModelPipeline: return "expert-tensor-model-pipeline-parallel";
    case GroupKind::ExpertTensorParallel: return "expert-tensor-parallel";
    case GroupKind::ExpertTensorAndModelParallel: return "expert-tensor-and-model-parallel";
  }
  return "unknown";
}

ParallelLayout::ParallelLayout(const ParallelFlags& flags, int world_size)
    : world_size_(world_size) {
  validate_parallel_flags(flags);
  if (world_size < 1) throw Error("world size must be positive, not " + std::to_string(world_size));
  const std::string world = "world size (" + std::to_string(world_size) + ")";
  if (world_size % flags.tensor_model_parallel_size != 0)
    throw UsageError(world + " is not divisible by --tensor-model-parallel-size (" +
                     std::to_string(flags.tensor_model_parallel_size) + ")");
  const std::int64_t model_size =
      flags.tensor_model_parallel_size * flags.pipeline_model_parallel_size * flags.context_parallel_size;
  if (world_size % model_size != 0)
    throw UsageError(world + " is not divisible by --tensor-model-parallel-size (" +
                     std::to_string(flags.tensor_model_parallel_size) +
                     ") x --pipeline-model-parallel-size (" +
                     std::to_string(flags.pipeline_model_parallel_size) + ")" +
                     (flags.context_parallel_size > 1
                          ? " x --context-parallel-size (" + std::to_string(flags.context_parallel_size) + ")"
                          : std::string()));
  tp_ = static_cast<int>(flags.tensor_model_parallel_size);
  pp_ = static_cast<int>(flags.pipeline_model_parallel_size);
  cp_ = static_cast<int>(flags.context_parallel_size);
  dp_ = static_cast<int>(world_size / model_size);
  // parallel_state.initialize_model_parallel: the expert grid (expert-tensor x ep x expert-dp x pp)
  // must tile the world too.
  const std::int64_t ep = flags.expert_model_parallel_size;
  const std::int64_t etp = flags.expert_tensor_parallel_size > 0 ? flags.expert_tensor_parallel_size : tp_;
  if (etp == tp_ && ep > 1 && (static_cast<std::int64_t>(dp_) * cp_) % ep != 0)
    throw UsageError("--expert-model-parallel-size (" + std::to_string(ep) + ") must divide the data-parallel size" +
                     (cp_ > 1 ? " x --context-parallel-size (" : " (") + std::to_string(dp_ * cp_) + ")");
  // parallel_state.initialize_model_parallel: "world_size (N) is not divisible by
  // expert_tensor_model_pipeline_parallel size (M)".
  if (world_size % (etp * ep * pp_) != 0)
    throw UsageError(world + " is not divisible by --expert-tensor-parallel-size (" + std::to_string(etp) +
                     ") x --expert-model-parallel-size (" + std::to_string(ep) +
                     ") x --pipeline-model-parallel-size (" + std::to_string(pp_) +
                     "), the expert_tensor_model_pipeline_parallel size (" + std::to_string(etp * ep * pp_) + ")");
  ep_ = static_cast<int>(ep);
  etp_ = static_cast<int>(etp);
}

RankCoordinates ParallelLayout::coordinates(int rank) const {
  if (rank < 0 || rank >= world_size_)
    throw Error("rank " + std::to_string(rank) + " is outside a world of " +
                std::to_string(world_size_));
  return {rank % tp_, (rank / (tp_ * cp_)) % dp_, rank / (tp_ * cp_ * dp_), (rank / tp_) % cp_};
}

int ParallelLayout::rank_of(const RankCoordinates& c) const {
  if (c.tensor < 0 || c.tensor >= tp_ || c.data < 0 || c.data >= dp_ || c.pipeline < 0 ||
      c.pipeline >= pp_ || c.context < 0 || c.context >= cp_)
    throw Error("rank coordinates (tp " + std::to_string(c.tensor) + ", dp " +
                std::to_string(c.data) + ", pp " + std::to_string(c.pipeline) +
                ") are outside the layout");
  return c.tensor + tp_ * (c.context + cp_ * (c.data + dp_ * c.pipeline));
}

std::vector<std::vector<int>> ParallelLayout::groups(GroupKind kind) const {
  std::vector<int> sizes = {tp_, cp_, 1, dp_, pp_};
  std::vector<bool> mask(kDims, false);
  if (kind == GroupKind::ExpertModelParallel || kind == GroupKind::ExpertDataParallel ||
      kind == GroupKind::ExpertTensorModelPipeline || kind == GroupKind::ExpertTensorParallel ||
      kind == GroupKind::ExpertTensorAndModelParallel) {
    // The expert grid: expert-tensor, no cp, ep, expert-dp, pp.
    sizes = {etp_, 1, ep_, expert_data_parallel_size(), pp_};
    if (kind == GroupKind::ExpertTensorModelPipeline) mask[kTp] = mask[kEp] = mask[kPp] = true;
    else if (kind == GroupKind::ExpertTensorAndModelParallel) mask[kTp] = mask[kEp] = true;
    else if (kind == GroupKind::ExpertTensorParallel) mask[kTp] = true;
    else mask[kind == GroupKind::ExpertModelParallel ? kEp : kDp] = true;
    return orthogonal_rank_groups(world_size_, sizes, mask);
  }
  switch (kind) {
    case GroupKind::TensorModelParallel: mask[kTp] = true; break;
    case GroupKind::DataParallel: mask[kDp] = true; break;
    case GroupKind::PipelineModelParallel: mask[kPp] = true; break;
    case GroupKind::ModelParallel: mask[kTp] = mask[kPp] = true; break;
    case GroupKind::ContextParallel: mask[kCp] = true; break;
    case GroupKind::DataParallelWithContext: mask[kCp] = mask[kDp] = true; break;
    case GroupKind::ExpertModelParallel:
    case GroupKind::ExpertDataParallel:
    case GroupKind::ExpertTensorModelPipeline:
    case GroupKind::ExpertTensorParallel:
    case GroupKind::ExpertTensorAndModelParallel: break;  // above
    case GroupKind::Embedding: {
      // parallel_state.default_embedding_ranks: the first and the last stage.
      std::vector<std::vector<int>> result;
      for (const auto& stages : groups(GroupKind::PipelineModelParallel)) {
        if (stages.size() == 1) result.push_back({stages.front()});
        else result.push_back({stages.front(), stages.back()});
      }
      return result;
    }
  }
  return orthogonal_rank_groups(world_size_, sizes, mask);
}

std::vector<int> ParallelLayout::group_of(GroupKind kind, int rank) const {
  for (auto& group : groups(kind)) {
    for (int member : group)
      if (member == rank) return group;
  }
  return {};
}

std::vector<std::vector<int>> orthogonal_rank_groups(int world_size, const std::vector<int>& sizes,
                                                     const std::vector<bool>& mask) {
  std::vector<int> masked_shape, unmasked_shape, masked_stride, unmasked_stride;
  int stride = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked_shape : unmasked_shape).push_back(sizes[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(stride);
    stride *= sizes[i];
  }
  if (stride != world_size)
    throw Error("parallel sizes multiply to " + std::to_string(stride) + ", not the world size " +
                std::to_string(world_size));
  int group_size = 1;
  for (int s : masked_shape) group_size *= s;
  const int num_groups = world_size / group_size;

  std::vector<std::vector<int>> groups(num_groups);
  for (int g = 0; g < num_groups; ++g) {
    const int base = inner_product(decompose(g, unmasked_shape), unmasked_stride);
    for (int r = 0; r < group_size; ++r)
      groups[g].push_back(base + inner_product(decompose(r, masked_shape), masked_stride));
  }
  return groups;
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace mgt::dist
