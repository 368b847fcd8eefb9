#include "train/step_phase_timer.hpp"

#include <utility>

namespace mgt {

StepPhaseTimer::Marks& StepPhaseTimer::begin_step(Backend& backend) {
  if (marks_.size() >= kMaxMarks) fold_marks();
  Marks& marks = marks_.emplace_back();
  marks.start = backend.record_timed_event();
  return marks;
}

void StepPhaseTimer::take(IterationLog& g) {
  fold_marks();
  const Phases sums = std::exchange(phases_, Phases{});
  if (sums.steps == 0) return;
  const double per = 1e3 / static_cast<double>(sums.steps);
  g.forward_backward_ms = sums.forward_backward * per;
  g.grads_sync_ms = sums.grads_sync * per;
  g.optimizer_ms = sums.optimizer * per;
}

// The marks' times into phases_ (each step's events have passed by the time the step returns,
// which reads the gradient norm back): the marks of a long log interval do not pile up.
void StepPhaseTimer::fold_marks() {
  for (Marks& m : marks_) {
    if (!m.optimizer_done) continue;  // a step that did not get that far
    phases_.forward_backward += m.forward_backward_done->seconds_since(*m.start);
    phases_.grads_sync += m.grads_synced->seconds_since(*m.forward_backward_done);
    phases_.optimizer += m.optimizer_done->seconds_since(*m.grads_synced);
    ++phases_.steps;
  }
  marks_.clear();
}

}  // namespace mgt
