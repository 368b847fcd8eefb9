#include "train/params_norm.hpp"

#include <cmath>
#include <span>
#include <vector>

namespace mgt {

double params_l2_norm(const GptParameters& params, dist::Communicator* model_parallel,
                      dist::Communicator* expert_tensor_model_pipeline) {
  // Each counted tensor's sum, added in order, in one pass with one read back (per region: the
  // expert-parallel tensors come last, ParameterTable::expert_begin).
  const std::int64_t expert_begin = params.table().expert_begin;
  std::vector<ElementRange> dense, experts;
  for (const ParameterEntry& e : params.entries())
    if (e.counted_on(params.tensor_parallel()))
      (e.offset < expert_begin ? dense : experts).push_back({e.offset, e.numel()});
  const auto completed = [&](const std::vector<ElementRange>& ranges, dist::Communicator* group) {
    double sum = params.backend().sum_of_squares(params.params(), ranges);
    if (group && group->size() > 1) group->all_reduce(std::span<double>(&sum, 1), dist::ReduceOp::Sum);
    return sum;
  };
  double sum_of_squares = completed(dense, model_parallel);
  // Every rank of the group takes part, a pipeline stage without MoE layers with an empty sum.
  if (expert_tensor_model_pipeline) sum_of_squares += completed(experts, expert_tensor_model_pipeline);
  return std::sqrt(sum_of_squares);
}

}  // namespace mgt
