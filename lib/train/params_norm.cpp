#include "train/params_norm.hpp"

#include <cmath>
#include <span>
#include <vector>

namespace mgt {

double params_l2_norm(const GptParameters& params, dist::Communicator* model_parallel,
                      dist::Communicator* expert_model_parallel) {
  // Each counted tensor's sum, added in order, in one pass with one read back (per region: the
  // expert-parallel tensors come last, ParameterTable::expert_begin).
  const std::int64_t expert_begin = params.table().expert_begin;
  std::vector<ElementRange> dense, experts;
  for (const ParameterEntry& e : params.entries())
    if (e.counted_on(params.tensor_parallel()))
      (e.offset < expert_begin ? dense : experts).push_back({e.offset, e.numel()});
  double sum_of_squares = params.backend().sum_of_squares(params.params(), dense);
  if (!experts.empty()) {
    double expert_sum = params.backend().sum_of_squares(params.params(), experts);
    if (expert_model_parallel && expert_model_parallel->size() > 1)
      expert_model_parallel->all_reduce(std::span<double>(&expert_sum, 1), dist::ReduceOp::Sum);
    sum_of_squares += expert_sum;
  }
  if (model_parallel && model_parallel->size() > 1)
    model_parallel->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  return std::sqrt(sum_of_squares);
}

}  // namespace mgt
