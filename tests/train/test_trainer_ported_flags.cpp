// The trainer with the Megatron flags that change results: what each changes, and what it must
// leave alone.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <regex>

#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

TEST_CASE("trainer: --log-params-norm and --log-num-zeros-in-grad in the log line", "[trainer]") {
  TrainerFixture f("trainer_gradient_statistics");
  RunCapture plain;
  run(f.options({"--train-iters", "4"}), plain);
  RunCapture logged;
  run(f.options({"--train-iters", "4", "--log-params-norm", "--log-num-zeros-in-grad"}), logged);
  CHECK(losses_of(logged) == losses_of(plain));  // statistics change nothing
  const auto lines = lines_containing(logged.out.str(), "] iteration ");
  REQUIRE(lines.size() == 4);
  for (const std::string& line : lines)
    CHECK(std::regex_search(line, std::regex(R"( grad norm: \d+\.\d{3} \| num zeros: \d+\.0 \| params norm: \d+\.\d{3} \|)")));
  REQUIRE(logged.records[1].params_norm);
  REQUIRE(logged.records[1].num_zeros);
  CHECK(*logged.records[1].num_zeros >= 0.0);
  CHECK(*logged.records[1].params_norm > 1.0);
}

TEST_CASE("trainer: --decoupled-lr equal to --lr changes nothing, another value changes the run", "[trainer]") {
  TrainerFixture f("trainer_decoupled_lr");
  RunCapture plain;
  run(f.options({"--train-iters", "4"}), plain);
  RunCapture same;
  run(f.options({"--train-iters", "4", "--decoupled-lr", "1e-3", "--decoupled-min-lr", "1e-4"}), same);
  CHECK(losses_of(same) == losses_of(plain));
  REQUIRE(same.records[0].decoupled_learning_rate);
  CHECK(*same.records[0].decoupled_learning_rate == same.records[0].learning_rate);

  RunCapture other;
  run(f.options({"--train-iters", "4", "--decoupled-lr", "1e-2"}), other);
  CHECK(other.records[0].loss == plain.records[0].loss);  // the first step has not happened yet
  CHECK(other.records[3].loss != plain.records[3].loss);
  // Linear decay from 1e-2 to --min-lr 1e-4 over 4 iterations, as the main rate from 1e-3.
  for (const IterationRecord& r : other.records) {
    const double progress = (r.learning_rate - 1e-3) / (1e-4 - 1e-3);
    CHECK(*r.decoupled_learning_rate == Approx(1e-2 + progress * (1e-4 - 1e-2)).epsilon(1e-12));
  }
  CHECK(lines_containing(other.out.str(), "| decoupled learning rate: ").size() == 4);
}

TEST_CASE("trainer: --apply-layernorm-1p trains the same model as plain norms, up to rounding", "[trainer]") {
  TrainerFixture f("trainer_layernorm_1p");
  // Zero-centred weights start at 0 (1 + 0 = the plain weights' 1) and get the same gradients;
  // only the rounding of w against 1 + w differs.
  RunCapture plain;
  run(f.options({"--train-iters", "6"}), plain);
  RunCapture centred;
  run(f.options({"--train-iters", "6", "--apply-layernorm-1p"}), centred);
  REQUIRE(centred.records.size() == 6);
  CHECK(centred.records[0].loss == plain.records[0].loss);
  for (std::size_t i = 0; i < 6; ++i) CHECK(centred.records[i].loss == Approx(plain.records[i].loss).epsilon(1e-5));

  // Stopped at 3 and resumed: the norms' 1 + w follows the loaded weights, bit for bit.
  const std::vector<std::string> resumable = {"--train-iters", "6", "--apply-layernorm-1p", "--save", f.dir + "/ckpt",
                                              "--save-interval", "3"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), resumable.begin(), resumable.end());
    return extra;
  };
  RunCapture first;
  run(f.options(with({"--exit-interval", "3"})), first);
  // The checkpoint stores the zero-centred weights.
  bool found = false;
  for (const auto& [name, bytes] : checkpoint_tensors(f.dir + "/ckpt")) {
    if (name.find("final_layernorm.weight") == std::string::npos) continue;
    found = true;
    float value = 0.0f;
    std::memcpy(&value, bytes.data(), sizeof value);
    CHECK(std::abs(value) < 0.1f);  // near 0, where plain weights sit near 1
  }
  CHECK(found);
  RunCapture second;
  run(f.options(with({"--load", f.dir + "/ckpt"})), second);
  std::vector<double> resumed = losses_of(first);
  for (double l : losses_of(second)) resumed.push_back(l);
  CHECK(resumed == losses_of(centred));
}

TEST_CASE("trainer: --calculate-per-token-loss divides by the global batch's tokens", "[trainer]") {
  TrainerFixture f("trainer_per_token_loss");
  // One micro-batch per iteration: the micro-batch mean is the per-token mean already.
  RunCapture mean_one;
  run(f.options({"--train-iters", "4", "--global-batch-size", "2"}), mean_one);
  RunCapture per_token_one;
  run(f.options({"--train-iters", "4", "--global-batch-size", "2", "--calculate-per-token-loss"}), per_token_one);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(per_token_one.records[i].loss == Approx(mean_one.records[i].loss).epsilon(1e-6));
    CHECK(per_token_one.records[i].grad_norm == Approx(mean_one.records[i].grad_norm).epsilon(1e-5));
  }
  // Two micro-batches with different token counts (--eod-mask-loss masks the documents' ends):
  // the mean of two means weighs their tokens differently from the mean over all tokens.
  RunCapture mean_two;
  run(f.options({"--train-iters", "4", "--eod-mask-loss"}), mean_two);
  RunCapture per_token_two;
  run(f.options({"--train-iters", "4", "--eod-mask-loss", "--calculate-per-token-loss"}), per_token_two);
  CHECK(per_token_two.records[0].loss == mean_two.records[0].loss);  // the same reported loss
  CHECK(per_token_two.records[0].grad_norm != Approx(mean_two.records[0].grad_norm).epsilon(1e-6));
  CHECK(per_token_two.records[3].loss != mean_two.records[3].loss);
}

TEST_CASE("trainer: --rampup-batch-size grows the batch and resumes mid-ramp bit for bit", "[trainer]") {
  TrainerFixture f("trainer_rampup");
  // Global batch 8 reached from 2 in steps of 2 over 24 samples (a step every 8 samples): sizes
  // 2, 2, 2, 2, 4, 4, 6, 6, then 8; 80 samples make 8 + (80 - 28) / 8 = 14 iterations.
  const std::vector<std::string> common = {"--train-samples", "80", "--global-batch-size", "8",
                                           "--rampup-batch-size", "2", "2", "24", "--eval-interval", "4"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  RunCapture straight;
  run(f.options(with({})), straight);
  REQUIRE(straight.records.size() == 14);
  const std::vector<std::int64_t> expected = {2, 2, 2, 2, 4, 4, 6, 6, 8, 8, 8, 8, 8, 8};
  std::vector<std::int64_t> sizes;
  for (const IterationRecord& r : straight.records) sizes.push_back(r.global_batch_size);
  CHECK(sizes == expected);
  const std::string out = straight.out.str();
  CHECK(lines_containing(out, "setting initial batch size to 2").size() == 1);
  CHECK(lines_containing(out, "ramping up batch size from 6 to 8").size() == 1);
  CHECK(lines_containing(out, "consumed samples:           76 |").size() == 1);
  CHECK(lines_containing(out, "global batch size:     4 |").size() == 2);

  // Stopped at iteration 6 (batch size 4, mid-ramp) and resumed.
  RunCapture first;
  run(f.options(with({"--save", f.dir + "/ckpt", "--save-interval", "100", "--exit-interval", "6"})), first);
  REQUIRE(first.records.size() == 6);
  RunCapture second;
  run(f.options(with({"--save", f.dir + "/ckpt", "--save-interval", "100", "--load", f.dir + "/ckpt"})), second);
  REQUIRE(second.records.size() == 8);
  std::vector<double> resumed = losses_of(first);
  for (double l : losses_of(second)) resumed.push_back(l);
  CHECK(resumed == losses_of(straight));
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(second.records[i].global_batch_size == expected[6 + i]);
    CHECK(second.records[i].learning_rate == straight.records[6 + i].learning_rate);
  }
}
