#include <catch2/catch.hpp>

#include <memory>

#include "kernels/backend_factory.hpp"
#include "train/step_phase_timer.hpp"

using namespace mgt;

namespace {

// One step through all its phases, each mark recorded in order as the trainer records them.
void complete_step(StepPhaseTimer& timer, Backend& backend) {
  StepPhaseTimer::Marks& marks = timer.begin_step(backend);
  marks.forward_backward_done = backend.record_timed_event();
  marks.grads_synced = backend.record_timed_event();
  marks.optimizer_done = backend.record_timed_event();
}

}  // namespace

TEST_CASE("step phase timer: no step, no phases", "[trainer]") {
  const auto backend = make_backend("cpu");
  StepPhaseTimer timer;
  IterationLog g;
  timer.take(g);
  CHECK_FALSE(g.forward_backward_ms.has_value());
  CHECK_FALSE(g.grads_sync_ms.has_value());
  CHECK_FALSE(g.optimizer_ms.has_value());
}

TEST_CASE("step phase timer: a step that stopped before its optimizer is not counted", "[trainer]") {
  const auto backend = make_backend("cpu");
  StepPhaseTimer timer;
  StepPhaseTimer::Marks& marks = timer.begin_step(*backend);
  CHECK(marks.start != nullptr);
  marks.forward_backward_done = backend->record_timed_event();
  IterationLog g;
  timer.take(g);
  CHECK_FALSE(g.forward_backward_ms.has_value());
}

TEST_CASE("step phase timer: the phases of every step since the last take, however many", "[trainer]") {
  const auto backend = make_backend("cpu");
  StepPhaseTimer timer;
  // More steps than the marks kept before they are folded into the sums.
  for (int i = 0; i < 200; ++i) complete_step(timer, *backend);
  IterationLog g;
  timer.take(g);
  REQUIRE(g.forward_backward_ms.has_value());
  REQUIRE(g.grads_sync_ms.has_value());
  REQUIRE(g.optimizer_ms.has_value());
  CHECK(*g.forward_backward_ms >= 0.0);
  CHECK(*g.grads_sync_ms >= 0.0);
  CHECK(*g.optimizer_ms >= 0.0);
  // Taken: the next interval starts empty.
  IterationLog next;
  timer.take(next);
  CHECK_FALSE(next.forward_backward_ms.has_value());
}
