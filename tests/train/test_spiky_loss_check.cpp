// --check-for-spiky-loss: Megatron's is_unexpectedly_large over each micro-batch's loss
// (train/spiky_loss_check.hpp), and mgt-train stopping on a spike in training and evaluation.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <regex>

#include "core/error.hpp"
#include "train/spiky_loss_check.hpp"
#include "trainer_testing.hpp"

using namespace mgt;

TEST_CASE("spiky loss: the first 100 values set the largest, a later value 10 times it is a spike", "[train]") {
  SpikyLossCheck check;
  for (int i = 0; i < 100; ++i) check.observe(i == 40 ? -300.0 : 100.0 + i);  // magnitudes: the largest is 300
  CHECK_FALSE(check.take());
  check.observe(2999.0);
  check.observe(std::numeric_limits<double>::quiet_NaN());  // left to the non-finite checks
  check.observe(std::numeric_limits<double>::infinity());
  CHECK_FALSE(check.take());
  check.observe(-3000.0);  // |value| >= 10 x 300
  check.observe(5000.0);   // the first spike is kept
  const auto spike = check.take();
  REQUIRE(spike);
  CHECK(spike->value == -3000.0);
  CHECK(spike->largest == 300.0);
  CHECK_FALSE(check.take());  // taken
  // The largest no longer moves after the first 100.
  check.observe(1e9);
  CHECK(check.take());
  check.observe(3000.0);
  CHECK(check.take()->largest == 300.0);
}

TEST_CASE("spiky loss: no value is a spike during the first 100", "[train]") {
  SpikyLossCheck check;
  check.observe(1.0);
  for (int i = 1; i < 100; ++i) check.observe(1e6 * i);
  CHECK_FALSE(check.take());
}

// The trainer: two micro-batches per iteration, so 50 iterations fill the 100 samples; the hook
// multiplies what the check sees by 1000 at one iteration.
TEST_CASE("spiky loss: mgt-train stops on a spiky training or evaluation loss, and otherwise trains as without",
          "[trainer]") {
  using namespace mgt::trainer_test;
  TrainerFixture f("trainer_spiky_loss");
  const std::vector<std::string> flags = {"--train-iters", "56", "--eval-interval", "52", "--eval-iters", "1"};
  std::vector<std::string> checked = flags;
  checked.push_back("--check-for-spiky-loss");
  RunCapture plain, quiet;
  run(f.options(flags), plain);
  run(f.options(checked), quiet);
  CHECK(losses_of(quiet) == losses_of(plain));

  const auto stops = [&](std::int64_t spiked_iteration) -> std::string {
    RunCapture c;
    TrainerHooks hooks;
    hooks.spike_losses = [=](std::int64_t iteration) { return iteration == spiked_iteration; };
    try {
      run(f.options(checked), c, hooks);
    } catch (const Error& e) {
      return e.what();
    }
    return "no stop";
  };
  // Within the first 100 micro-batches a spike only raises the largest.
  CHECK(stops(40) == "no stop");
  const std::string training = stops(51);
  CHECK(std::regex_search(training, std::regex("^rank 0, iteration 51: Unexpected result [0-9.e+]+ "
                                               "\\(message='Spiky loss'\\): a micro-batch's loss at least 10 times "
                                               "the largest of the first 100 \\([0-9.e+]+\\) "
                                               "\\(--check-for-spiky-loss\\)$")));
  // The validation after iteration 52 (whose losses the hook sees as iteration 53's).
  CHECK(stops(53).rfind("rank 0, iteration 52: Unexpected result ", 0) == 0);
}
