// --fp16's loss scaling on the CPU backend, which computes in fp32: the scaling itself is
// applied, so its arithmetic, its skips and its checkpointed state can be checked here.
#include <catch2/catch.hpp>

#include <cmath>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "train/loss_scaler.hpp"
#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

namespace {

std::vector<double> scales_of(const RunCapture& c) {
  std::vector<double> out;
  for (const auto& r : c.records) out.push_back(r.loss_scale);
  return out;
}

std::vector<double> grad_norms_of(const RunCapture& c) {
  std::vector<double> out;
  for (const auto& r : c.records) out.push_back(r.grad_norm);
  return out;
}

}  // namespace

// Multiplying by a power of two and by its inverse only moves exponents in fp32: the scaled
// run's gradients, norms and updates are the unscaled run's, bit for bit.
TEST_CASE("trainer: --fp16 with a constant power-of-two loss scale trains as fp32 does", "[trainer][loss_scaler]") {
  TrainerFixture f("trainer_fp16_constant");
  RunCapture fp32;
  run(f.options({"--train-iters", "4"}), fp32);
  RunCapture fp16;
  run(f.options({"--train-iters", "4", "--fp16", "--loss-scale", "4096"}), fp16);
  REQUIRE(fp16.records.size() == 4);
  CHECK(losses_of(fp16) == losses_of(fp32));
  CHECK(grad_norms_of(fp16) == grad_norms_of(fp32));
  CHECK(scales_of(fp16) == std::vector<double>(4, 4096.0));
  CHECK(scales_of(fp32) == std::vector<double>(4, 1.0));
  const auto lines = lines_containing(fp16.out.str(), "] iteration ");
  REQUIRE(lines.size() == 4);
  CHECK(lines[3].find("| loss scale: 4096.0 |") != std::string::npos);
  CHECK(lines_containing(fp32.out.str(), "| loss scale: 1.0 |").size() == 4);
}

// A scale so large that the scaled gradients overflow fp32: the first iterations are skipped
// (counted as skipped, not as NaN, and not stopping the run) while the scale backs off, by
// Megatron's hysteresis rule, until the gradients are finite; then the run trains. The loss is
// the per-token sum (--calculate-per-token-loss), so that the scale reaches the loss gradient
// undivided and the embedding's gradient, summed over the tokens, overflows.
TEST_CASE("trainer: --fp16 dynamic loss scale backs off from an overflow, then trains", "[trainer][loss_scaler]") {
  TrainerFixture f("trainer_fp16_overflow");
  const std::string initial = "1.7014118346046923e+38";  // 2^127, the largest power of two in fp32
  RunCapture c;
  TrainerSettings settings;
  settings.max_consecutive_nonfinite_iterations = 2;  // overflow skips do not count towards it
  run(f.options({"--train-iters", "16", "--fp16", "--initial-loss-scale", initial, "--hysteresis", "2",
                 "--calculate-per-token-loss", "--log-interval", "16"}),
      c, {}, settings);
  REQUIRE(c.result.iteration == 16);
  REQUIRE(c.records.size() == 16);
  REQUIRE(c.records[0].skipped);
  // The scale each iteration leaves, replayed by a scaler told which iterations were skipped.
  LossScalerSettings s;
  s.initial_scale = std::ldexp(1.0, 127);
  LossScaler expected(s);
  std::int64_t skipped = 0;
  for (const IterationRecord& r : c.records) {
    INFO("iteration " << r.iteration);
    expected.update(r.skipped);
    CHECK(r.loss_scale == expected.scale());
    CHECK(std::isfinite(r.loss));
    skipped += r.skipped ? 1 : 0;
  }
  // Once trained, the scale stays (a window of 1000 good steps is far away).
  CHECK(skipped >= 2);
  CHECK(skipped < 16);
  CHECK_FALSE(c.records.back().skipped);
  CHECK(c.records.back().loss_scale < std::ldexp(1.0, 127));
  const auto line = lines_containing(c.out.str(), "] iteration ");
  REQUIRE(line.size() == 1);
  char expected_counts[128];
  std::snprintf(expected_counts, sizeof expected_counts,
                "| number of skipped iterations: %3lld | number of nan iterations:   0 |",
                static_cast<long long>(skipped));
  CHECK(line[0].find(expected_counts) != std::string::npos);
}

// Overflows emulated by NaN gradients: with --hysteresis 2 the first keeps the scale, each later
// one halves it, and good steps leave it until a window of them doubles it.
TEST_CASE("trainer: --fp16 overflow steps follow Megatron's hysteresis", "[trainer][loss_scaler]") {
  TrainerFixture f("trainer_fp16_hysteresis");
  RunCapture c;
  TrainerHooks hooks;
  hooks.poison_gradients = [](std::int64_t iteration) { return iteration <= 3; };
  TrainerSettings settings;
  settings.max_consecutive_nonfinite_iterations = 2;
  run(f.options({"--train-iters", "6", "--fp16", "--initial-loss-scale", "1024", "--loss-scale-window", "2",
                 "--log-interval", "3"}),
      c, hooks, settings);
  REQUIRE(c.records.size() == 6);
  CHECK(scales_of(c) == std::vector<double>{1024, 512, 256, 256, 512, 512});
  for (std::size_t i = 0; i < 6; ++i) CHECK(c.records[i].skipped == (i < 3));
  const auto lines = lines_containing(c.out.str(), "] iteration ");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("| loss scale: 256.0 |") != std::string::npos);
  CHECK(lines[0].find("grad norm:") == std::string::npos);  // Megatron's None for a skipped step
  CHECK(lines[0].find("| number of skipped iterations:   3 | number of nan iterations:   0 |") != std::string::npos);
  CHECK(lines[1].find("| loss scale: 512.0 |") != std::string::npos);
  CHECK(lines[1].find("| number of skipped iterations:   0 |") != std::string::npos);
}

// With a constant scale an overflow never resolves itself: it counts towards the stop.
TEST_CASE("trainer: --fp16 overflows at a scale that cannot drop stop the run", "[trainer][loss_scaler]") {
  TrainerFixture f("trainer_fp16_stuck");
  TrainerHooks hooks;
  hooks.poison_gradients = [](std::int64_t) { return true; };
  TrainerSettings settings;
  settings.max_consecutive_nonfinite_iterations = 3;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--loss-scale", "1024"},
        std::vector<std::string>{"--initial-loss-scale", "4", "--min-loss-scale", "2", "--hysteresis", "1"}}) {
    RunCapture c;
    std::vector<std::string> extra = {"--train-iters", "10", "--fp16"};
    extra.insert(extra.end(), flags.begin(), flags.end());
    CHECK_THROWS_WITH(run(f.options(extra), c, hooks, settings), Catch::Contains("3 consecutive iterations"));
  }
}

// The scaler's state is part of the optimizer state: a resumed run continues with the scale,
// growth and hysteresis counts the uninterrupted run had, bit for bit.
TEST_CASE("trainer: --fp16 dynamic loss scale resumes exactly", "[trainer][loss_scaler]") {
  TrainerFixture f("trainer_fp16_resume");
  TrainerHooks hooks;
  // Overflows on both sides of the checkpoint at iteration 4.
  hooks.poison_gradients = [](std::int64_t iteration) { return iteration == 2 || iteration == 4 || iteration == 7; };
  const std::vector<std::string> common = {"--train-iters",       "8",   "--fp16",       "--initial-loss-scale", "65536",
                                           "--loss-scale-window", "3",   "--hysteresis", "2",
                                           "--save-interval",     "100", "--eval-interval", "4"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  RunCapture straight;
  run(f.options(with({})), straight, hooks);
  REQUIRE(straight.records.size() == 8);
  // 2: hysteresis 2 → 1; 4: halves; 5–7: 7 halves again (the count was not restored); 8 good.
  CHECK(scales_of(straight) == std::vector<double>{65536, 65536, 65536, 32768, 32768, 32768, 16384, 16384});

  RunCapture first_half;
  run(f.options(with({"--save", f.dir + "/ckpt", "--exit-interval", "4"})), first_half, hooks);
  REQUIRE(first_half.result.iteration == 4);
  ckpt::ShardReader reader(f.dir + "/ckpt/iter_0000004/mp_rank_00.h5");
  const auto& extra = reader.metadata().extra_json;
  REQUIRE(extra.count("grad_scaler") == 1);
  CHECK(extra.at("grad_scaler") == "{\"scale\": 32768.0, \"growth_tracker\": 0, \"hysteresis_tracker\": 0}");

  RunCapture second_half;
  run(f.options(with({"--load", f.dir + "/ckpt"})), second_half, hooks);
  REQUIRE(second_half.records.size() == 4);
  std::vector<double> losses = losses_of(first_half);
  std::vector<double> scales = scales_of(first_half);
  for (const auto& r : second_half.records) {
    losses.push_back(r.loss);
    scales.push_back(r.loss_scale);
  }
  CHECK(losses == losses_of(straight));
  CHECK(scales == scales_of(straight));

  // A checkpoint without the scaler's state (an fp32 run's) starts the scale over.
  RunCapture plain;
  run(f.options({"--train-iters", "3", "--save", f.dir + "/plain", "--save-interval", "2", "--exit-interval", "2"}),
      plain);
  RunCapture from_plain;
  run(f.options({"--train-iters", "3", "--fp16", "--initial-loss-scale", "512", "--load", f.dir + "/plain"}),
      from_plain);
  REQUIRE(from_plain.records.size() == 1);
  CHECK(from_plain.records[0].loss_scale == 512.0);
}
