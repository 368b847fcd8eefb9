// Megatron's level-1 timers of the training step, from queue events (the device's time between
// them, no synchronisation added): per iteration, the micro-batches' forwards and backwards, the
// gradients' finalisation and data-parallel reduction (what the step waited for of it), and the
// optimizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.hpp"
#include "train/training_log.hpp"

namespace mgt {

class StepPhaseTimer {
public:
  // The queue events of one step, each recorded by the step as it ends a phase.
  struct Marks {
    std::unique_ptr<QueueEvent> start, forward_backward_done, grads_synced, optimizer_done;
  };

  // A new step's marks, its start recorded on `backend`'s queue. The reference holds until the
  // next begin_step.
  Marks& begin_step(Backend& backend);
  // The phases' milliseconds per iteration of the steps since the last call, into g (left unset
  // when no step got as far as its optimizer).
  void take(IterationLog& g);

private:
  void fold_marks();

  // The marks of the steps since the last fold.
  std::vector<Marks> marks_;
  static constexpr std::size_t kMaxMarks = 64;
  struct Phases {
    double forward_backward = 0.0, grads_sync = 0.0, optimizer = 0.0;  // seconds
    std::int64_t steps = 0;
  };
  Phases phases_;  // of the steps folded since the last take
};

}  // namespace mgt
