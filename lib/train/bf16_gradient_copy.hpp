// --grad-reduce-in-bf16 (Megatron's flag): the data-parallel reduction of the gradients runs on
// bf16 copies of them, half the bytes of the fp32 gradient buffer. Megatron keeps the gradient
// buffer itself in bf16 under that flag (its micro-batches accumulate in bf16 too); mgt
// accumulates in fp32 as always, rounds to bf16 for the reduction only, and takes the reduced
// sums back into the fp32 buffer.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

class Bf16GradientCopy {
public:
  explicit Bf16GradientCopy(GptParameters& params);

  // The bf16 copy of the whole gradient buffer, for registering with a communicator.
  FloatView whole() { return copy_.view(); }
  // Gradient elements [begin, end) rounded into the copy; the copy's view of them.
  FloatView round(std::int64_t begin, std::int64_t end);
  // The copy's elements [begin, end) back into the fp32 gradient buffer.
  void take_back(std::int64_t begin, std::int64_t end);

private:
  GptParameters* params_;
  DeviceBuffer copy_;
};

}  // namespace mgt
