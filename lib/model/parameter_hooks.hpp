// What a training loop learns from the model's passes so that data-parallel communication can
// run beside them: Megatron's forward pre-hooks (megatron/core/distributed/
// distributed_data_parallel.py _make_forward_pre_hook, which waits for a bucket's parameter
// all-gather) and its gradient-accumulation hooks (_make_backward_post_hook, which starts a
// bucket's reduction once all of its parameters have their final gradient).
//
// Offsets are positions in the model's flat parameter (and gradient) buffer. The model lays out
// its blocks in forward order (embedding, layers, final norm and output layer), so a backward,
// which runs them in reverse, finishes the gradients from the end of the buffer down.
#pragma once
#include <cstdint>

namespace mgt {

class ParameterHooks {
public:
  virtual ~ParameterHooks() = default;
  // Before a forward (training or evaluation) reads parameters [begin, end).
  virtual void before_parameter_use(std::int64_t begin, std::int64_t end) = 0;
  // During a backward, after a block's weight gradients are accumulated: the gradients of every
  // parameter at offset `begin` or later will not change again in this pass.
  virtual void gradients_done_from(std::int64_t begin) = 0;
};

}  // namespace mgt
