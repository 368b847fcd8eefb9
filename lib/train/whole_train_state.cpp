#include "train/whole_train_state.hpp"

#include <span>

#include "core/error.hpp"
#include "model/parameter_sharding.hpp"

namespace mgt {

namespace {

// Rank 0 of `group` receives every rank's shard of `e` and returns the whole tensor; the other
// ranks send theirs and return nothing.
std::vector<float> gather_tensor(const ParameterEntry& e, std::vector<float> local, dist::Communicator& group) {
  const int size = group.size();
  if (e.expert_tensor.size > 0)
    throw Error("internal error: " + e.name + " is split over expert-tensor-parallel ranks, not gathered over " +
                group.description());
  if (e.tensor_parallel_replicated || size == 1) return group.rank() == 0 ? local : std::vector<float>{};
  if (group.rank() != 0) {
    group.send(std::span<const float>(local), 0);
    return {};
  }
  std::vector<float> whole(static_cast<std::size_t>(e.global_numel()));
  unshard_tensor(e, TensorParallelRank{size, 0}, local, whole);
  // Every rank's shard has the same shape (the table splits evenly): one buffer serves them all.
  for (int source = 1; source < size; ++source) {
    group.recv(std::span<float>(local), source);
    unshard_tensor(e, TensorParallelRank{size, source}, local, whole);
  }
  return whole;
}

}  // namespace

std::optional<WholeTrainState> gather_whole_train_state(const GptParameters& params, const AdamWOptimizer& optimizer,
                                                        dist::Communicator& tensor_parallel, bool with_optimizer) {
  if (tensor_parallel.size() != params.tensor_parallel().size ||
      tensor_parallel.rank() != params.tensor_parallel().rank)
    throw Error("internal error: parameters of tensor-parallel rank " + std::to_string(params.tensor_parallel().rank) +
                " of " + std::to_string(params.tensor_parallel().size) + " gathered over " +
                tensor_parallel.description());
  const bool root = tensor_parallel.rank() == 0;
  WholeTrainState state;
  if (root) state.table = gpt_parameter_table(params.config());
  for (const ParameterEntry& e : params.entries()) {
    std::vector<float> weights = gather_tensor(e, params.read_param(e), tensor_parallel);
    if (root) state.weights.emplace(e.name, std::move(weights));
    if (!with_optimizer) continue;
    std::vector<float> exp_avg = gather_tensor(e, optimizer.read_exp_avg(e), tensor_parallel);
    std::vector<float> exp_avg_sq = gather_tensor(e, optimizer.read_exp_avg_sq(e), tensor_parallel);
    if (!root) continue;
    state.exp_avg.emplace(e.name, std::move(exp_avg));
    state.exp_avg_sq.emplace(e.name, std::move(exp_avg_sq));
  }
  if (!root) return std::nullopt;
  return state;
}

}  // namespace mgt
