#include "train/params_norm.hpp"

#include <cmath>
#include <span>

namespace mgt {

double params_l2_norm(const GptParameters& params, dist::Communicator* model_parallel) {
  double sum_of_squares = 0.0;
  for (const ParameterEntry& e : params.entries())
    if (e.counted_on(params.tensor_parallel())) sum_of_squares += params.backend().sum_of_squares(params.param(e));
  if (model_parallel && model_parallel->size() > 1)
    model_parallel->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  return std::sqrt(sum_of_squares);
}

}  // namespace mgt
