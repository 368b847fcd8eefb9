#include "train/params_norm.hpp"

#include <cmath>
#include <span>
#include <vector>

namespace mgt {

double params_l2_norm(const GptParameters& params, dist::Communicator* model_parallel) {
  // Each counted tensor's sum, added in order, in one pass with one read back.
  std::vector<ElementRange> tensors;
  for (const ParameterEntry& e : params.entries())
    if (e.counted_on(params.tensor_parallel())) tensors.push_back({e.offset, e.numel()});
  double sum_of_squares = params.backend().sum_of_squares(params.params(), tensors);
  if (model_parallel && model_parallel->size() > 1)
    model_parallel->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  return std::sqrt(sum_of_squares);
}

}  // namespace mgt
