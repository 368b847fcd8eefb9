#include "train/bf16_gradient_copy.hpp"

#include <utility>

namespace mgt {

Bf16GradientCopy::Bf16GradientCopy(GptParameters& params)
    : params_(&params), copy_(params.backend(), params.grads().size(), FloatType::kBf16) {}

FloatView Bf16GradientCopy::round(std::int64_t begin, std::int64_t end) {
  const FloatView part = copy_.view().subspan(begin, end - begin);
  params_->backend().convert(std::as_const(*params_).grads().subspan(begin, end - begin), part);
  return part;
}

void Bf16GradientCopy::take_back(std::int64_t begin, std::int64_t end) {
  params_->backend().convert(copy_.view().subspan(begin, end - begin), params_->grads().subspan(begin, end - begin));
}

}  // namespace mgt
