#include <catch2/catch.hpp>

#include <cmath>
#include <csignal>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "core/error.hpp"
#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

TEST_CASE("trainer: a step with NaN gradients is skipped and counted", "[trainer]") {
  TrainerFixture f("trainer_nan_step");
  RunCapture c;
  TrainerHooks hooks;
  hooks.poison_gradients = [](std::int64_t iteration) { return iteration == 3; };
  run(f.options({"--train-iters", "5", "--log-interval", "5"}), c, hooks);
  REQUIRE(c.records.size() == 5);
  CHECK(c.records[2].skipped);
  CHECK(std::isnan(c.records[2].grad_norm));
  // Not applied: the weights stay finite, and the schedule did not advance.
  for (std::size_t i : {0u, 1u, 3u, 4u}) {
    CHECK_FALSE(c.records[i].skipped);
    CHECK(std::isfinite(c.records[i].loss));
  }
  CHECK(c.records[3].learning_rate == c.records[2].learning_rate);
  CHECK(c.records[2].learning_rate != c.records[1].learning_rate);
  const auto line = lines_containing(c.out.str(), "] iteration ");
  REQUIRE(line.size() == 1);
  CHECK(line[0].find("consumed samples:           20 |") != std::string::npos);
  CHECK(line[0].find("| grad norm: ") != std::string::npos);
  CHECK(line[0].find("| number of skipped iterations:   1 | number of nan iterations:   1 |") != std::string::npos);
}

TEST_CASE("trainer: a run of NaN steps stops training and keeps the last checkpoint", "[trainer]") {
  TrainerFixture f("trainer_nan_run");
  const std::string save = f.dir + "/ckpt";
  RunCapture c;
  TrainerHooks hooks;
  hooks.poison_gradients = [](std::int64_t iteration) { return iteration >= 3; };
  TrainerSettings settings;
  settings.max_consecutive_nonfinite_iterations = 3;
  try {
    run(f.options({"--train-iters", "10", "--save", save, "--save-interval", "2"}), c, hooks, settings);
    FAIL("training went on through NaN gradients");
  } catch (const Error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("training stopped at iteration 5") != std::string::npos);
    CHECK(message.find("3 consecutive iterations") != std::string::npos);
    CHECK(message.find("iter_0000004") != std::string::npos);
    CHECK(message.find("intact") != std::string::npos);
    CHECK(e.exit_code() == kExitFailure);
  }
  CHECK(c.records.size() == 4);  // iteration 5 ended the run inside its step
  // Iteration 4 was saved after two skipped updates: its weights are iteration 2's, untouched by
  // the NaN gradients; iteration 5 stopped the run before anything else was written.
  CHECK(ckpt::latest_iteration(save) == 4);
  ckpt::ShardReader reader(save + "/iter_0000004/mp_rank_00.h5");
  CHECK_NOTHROW(reader.verify());
  CHECK(reader.metadata().iteration == 4);
  ckpt::ShardReader before(save + "/iter_0000002/mp_rank_00.h5");
  for (const auto& name : before.tensor_names("model")) {
    INFO(name);
    CHECK(reader.read_bytes(name) == before.read_bytes(name));
  }
}

TEST_CASE("trainer: SIGTERM finishes the step, saves and stops cleanly", "[trainer]") {
  TrainerFixture f("trainer_sigterm");
  const std::string save = f.dir + "/ckpt";
  RunCapture c;
  TrainerHooks hooks;
  hooks.after_iteration = [](const IterationRecord& r) {
    if (r.iteration == 3) std::raise(SIGTERM);
  };
  run(f.options({"--train-iters", "10", "--save", save, "--save-interval", "100"}), c, hooks);
  CHECK(c.result.exit_reason == ExitReason::Signal);
  CHECK(c.result.iteration == 3);
  CHECK(c.records.size() == 3);
  CHECK(ckpt::latest_iteration(save) == 3);
  CHECK(lines_containing(c.out.str(), "[exiting program after receiving SIGTERM.] datetime: ").size() == 1);
  CHECK(lines_containing(c.out.str(), "after training is done").empty());
}

TEST_CASE("trainer: the configured exit signal saves and stops cleanly", "[trainer]") {
  TrainerFixture f("trainer_exit_signal");
  const std::string save = f.dir + "/ckpt";
  RunCapture c;
  TrainerHooks hooks;
  hooks.after_iteration = [](const IterationRecord& r) {
    if (r.iteration == 2) std::raise(SIGUSR1);
  };
  run(f.options({"--train-iters", "10", "--save", save, "--save-interval", "100", "--exit-signal-handler",
                 "--exit-signal", "SIGUSR1"}),
      c, hooks);
  CHECK(c.result.exit_reason == ExitReason::Signal);
  CHECK(c.result.iteration == 2);
  CHECK(ckpt::latest_iteration(save) == 2);
  CHECK(lines_containing(c.out.str(), "[exiting program after receiving SIGUSR1.]").size() == 1);
}

TEST_CASE("trainer: --exit-interval saves before exiting", "[trainer]") {
  TrainerFixture f("trainer_exit_interval");
  const std::string save = f.dir + "/ckpt";
  RunCapture c;
  run(f.options({"--train-iters", "10", "--save", save, "--save-interval", "100", "--exit-interval", "3"}), c);
  CHECK(c.result.exit_reason == ExitReason::Interval);
  CHECK(c.result.iteration == 3);
  CHECK(ckpt::latest_iteration(save) == 3);
  CHECK(lines_containing(c.out.str(), "saving checkpoint at iteration       3 to " + save + " in hdf5 format").size() == 1);
  CHECK(lines_containing(c.out.str(), "[exiting program at iteration 3] datetime: ").size() == 1);
}

TEST_CASE("trainer: --load with another --hidden-size names the tensor", "[trainer]") {
  TrainerFixture f("trainer_load_mismatch");
  const std::string save = f.dir + "/ckpt";
  RunCapture c;
  run(f.options({"--train-iters", "2", "--save", save, "--save-interval", "2"}), c);
  REQUIRE(ckpt::latest_iteration(save) == 2);

  RunCapture other;
  try {
    run(f.options({"--train-iters", "4", "--load", save, "--hidden-size", "64"}), other);
    FAIL("a checkpoint of another shape was loaded");
  } catch (const Error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("'model/embedding.word_embeddings.weight'") != std::string::npos);
    CHECK(message.find("[64, 32]") != std::string::npos);
    CHECK(message.find("[64, 64]") != std::string::npos);
    CHECK(message.find("--hidden-size 32 (this run: 64)") != std::string::npos);
  }
  try {
    run(f.options({"--train-iters", "4", "--load", save, "--untie-embeddings-and-output-weights"}), other);
    FAIL("a tied checkpoint was loaded into an untied model");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("'model/output_layer.weight'") != std::string::npos);
  }
  // Another kind of layer: the flag is named, before the sizes it changes.
  const std::pair<std::vector<std::string>, std::string> kinds[] = {
      {{"--normalization", "RMSNorm"}, "saved with --normalization LayerNorm (this run: RMSNorm)"},
      {{"--position-embedding-type", "rope"}, "saved with --position-embedding-type learned_absolute (this run: rope)"},
      {{"--swiglu"}, "saved with no --swiglu (this run: --swiglu), --ffn-hidden-size"},
      {{"--disable-bias-linear"}, "saved with biases (this run: --disable-bias-linear)"},
      {{"--qk-layernorm"}, "saved with no --qk-layernorm (this run: --qk-layernorm)"},
  };
  for (const auto& [flags, named] : kinds) {
    std::vector<std::string> args = {"--train-iters", "4", "--load", save};
    args.insert(args.end(), flags.begin(), flags.end());
    INFO(flags.front());
    CHECK_THROWS_WITH(run(f.options(args), other), Catch::Matchers::Contains(named));
  }
}

TEST_CASE("trainer: flags it cannot honour yet are refused by name", "[trainer]") {
  TrainerFixture f("trainer_refused");
  RunCapture c;
  try {
    run(f.options({"--train-iters", "2", "--reset-attention-mask"}), c);
    FAIL("--reset-attention-mask accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--reset-attention-mask") != std::string::npos);
    CHECK(e.exit_code() == kExitUsage);
  }
}
