#include <catch2/catch.hpp>

#include "ckpt/checkpoint_layout.hpp"
#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

// Dropout on, two micro-batches per iteration, validation every 2 iterations: stopping halfway
// (--exit-interval saves) and resuming must replay the uninterrupted run bit for bit.
TEST_CASE("trainer: resumed run is bit-identical to an uninterrupted one", "[trainer]") {
  TrainerFixture f("trainer_resume");
  const std::vector<std::string> common = {"--train-iters", "8", "--save-interval", "100", "--eval-interval", "2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };

  RunCapture straight;
  run(f.options(with({"--save", f.dir + "/straight"})), straight);
  REQUIRE(straight.result.iteration == 8);
  REQUIRE(straight.records.size() == 8);

  RunCapture first_half;
  run(f.options(with({"--save", f.dir + "/resumed", "--exit-interval", "4"})), first_half);
  CHECK(first_half.result.exit_reason == ExitReason::Interval);
  REQUIRE(first_half.result.iteration == 4);
  CHECK(ckpt::latest_iteration(f.dir + "/resumed") == 4);

  // Control: without the optimizer state the continuation differs, so the comparisons below
  // can tell an exact resume from a merely plausible one.
  RunCapture control;
  run(f.options(with({"--load", f.dir + "/resumed", "--no-load-optim"})), control);
  REQUIRE(control.records.size() == 4);
  CHECK(control.records[0].loss == straight.records[4].loss);  // same weights, same batch
  CHECK(control.records[3].loss != straight.records[7].loss);

  RunCapture second_half;
  run(f.options(with({"--save", f.dir + "/resumed", "--load", f.dir + "/resumed"})), second_half);
  REQUIRE(second_half.result.iteration == 8);
  REQUIRE(second_half.records.size() == 4);
  CHECK(second_half.records.front().iteration == 5);
  CHECK(lines_containing(second_half.out.str(), "successfully loaded checkpoint").size() == 1);

  std::vector<double> resumed = losses_of(first_half);
  for (double l : losses_of(second_half)) resumed.push_back(l);
  CHECK(resumed == losses_of(straight));  // exact, not approximate
  for (std::size_t i = 0; i < 8; ++i) {
    const IterationRecord& a = straight.records[i];
    const IterationRecord& b = i < 4 ? first_half.records[i] : second_half.records[i - 4];
    CHECK(a.grad_norm == b.grad_norm);
    CHECK(a.learning_rate == b.learning_rate);
  }

  // Validation continues from where the first half left its iterator.
  auto validation = [](const RunCapture& c) { return lines_containing(c.out.str(), "validation loss at"); };
  std::vector<std::string> resumed_validation = validation(first_half);
  for (const auto& l : validation(second_half)) resumed_validation.push_back(l);
  CHECK(resumed_validation == validation(straight));

  const auto a = checkpoint_tensors(f.dir + "/straight");
  const auto b = checkpoint_tensors(f.dir + "/resumed");
  REQUIRE(a.size() == b.size());
  REQUIRE_FALSE(a.empty());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second == b[i].second);
  }
}
