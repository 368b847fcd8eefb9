// The Megatron flags that change results and that a ported launch script may carry: parsed,
// checked as Megatron checks them (megatron/training/arguments.py), bad values refused naming
// the flag.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

const std::vector<std::string> kMinimal = {
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--max-position-embeddings", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};

TrainOptions parse_with(std::vector<std::string> extra, int world_size = 1) {
  std::vector<std::string> args = {"mgt-train"};
  args.insert(args.end(), kMinimal.begin(), kMinimal.end());
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), world_size);
}

std::string usage_error_with(std::vector<std::string> extra, int world_size = 1) {
  try {
    parse_with(std::move(extra), world_size);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("ported flags: --log-params-norm and --log-num-zeros-in-grad", "[train]") {
  const TrainOptions o = parse_with({"--train-iters", "10", "--log-params-norm", "--log-num-zeros-in-grad"});
  CHECK(o.logging.log_params_norm);
  CHECK(o.logging.log_num_zeros_in_grad);
  CHECK_FALSE(parse_with({"--train-iters", "10"}).logging.log_params_norm);
}

TEST_CASE("ported flags: --apply-layernorm-1p", "[train]") {
  CHECK(parse_with({"--train-iters", "10", "--apply-layernorm-1p"}).model.apply_layernorm_1p);
  CHECK_FALSE(parse_with({"--train-iters", "10"}).model.apply_layernorm_1p);
  CHECK(usage_error_with({"--train-iters", "10", "--apply-layernorm-1p=1"}) == "--apply-layernorm-1p takes no value");
}

TEST_CASE("ported flags: --qk-layernorm", "[train]") {
  CHECK(parse_with({"--train-iters", "10", "--qk-layernorm"}).model.qk_layernorm);
  CHECK_FALSE(parse_with({"--train-iters", "10"}).model.qk_layernorm);
}

TEST_CASE("ported flags: --decoupled-lr and --decoupled-min-lr", "[train]") {
  const TrainOptions o = parse_with({"--train-iters", "10", "--decoupled-lr", "5e-3", "--decoupled-min-lr", "1e-4"});
  CHECK(o.optim.decoupled_lr == 5e-3);
  CHECK(o.optim.decoupled_min_lr == 1e-4);
  CHECK(usage_error_with({"--train-iters", "10", "--decoupled-min-lr", "1e-4"}) ==
        "--decoupled-min-lr needs --decoupled-lr");
  CHECK(usage_error_with({"--train-iters", "10", "--decoupled-lr", "-1"}) == "--decoupled-lr must be at least 0, got -1");
  CHECK(usage_error_with({"--train-iters", "10", "--decoupled-lr", "1e-3", "--decoupled-min-lr", "2e-3"}) ==
        "--decoupled-min-lr must not exceed --decoupled-lr");
  CHECK(usage_error_with({"--train-iters", "10", "--decoupled-lr", "1e-5", "--min-lr", "1e-4"}) ==
        "--min-lr (the default of --decoupled-min-lr) must not exceed --decoupled-lr");
  CHECK(usage_error_with({"--train-iters", "10", "--decoupled-lr", "x"}) == "--decoupled-lr: 'x' is not a number");
}

TEST_CASE("ported flags: --rampup-batch-size", "[train]") {
  const TrainOptions o = parse_with({"--train-samples", "100", "--global-batch-size", "16", "--micro-batch-size", "4",
                                     "--rampup-batch-size", "4", "4", "24"});
  REQUIRE(o.optim.rampup_batch_size);
  CHECK(o.optim.rampup_batch_size->start == 4);
  CHECK(o.total_train_iters() == 8);   // Megatron's update_train_iters
  CHECK(o.num_microbatches() == 4);    // the final size's, for evaluation
  CHECK(usage_error_with({"--train-iters", "10", "--global-batch-size", "16", "--rampup-batch-size", "4", "4", "24"})
            .rfind("--rampup-batch-size needs --train-samples", 0) == 0);
  // Every size reached must be a multiple of micro-batch x data-parallel size: 4 with 2 ranks
  // of micro-batch 2 is, 6 is not.
  CHECK(parse_with({"--train-samples", "100", "--global-batch-size", "16", "--rampup-batch-size", "4", "4", "24"}, 2)
            .parallel.data_parallel_size == 2);
  CHECK(usage_error_with({"--train-samples", "100", "--global-batch-size", "16", "--rampup-batch-size", "4", "6", "24"}, 2) ==
        "--rampup-batch-size: the global batch size 10 that the ramp-up reaches is not divisible by micro batch size (2) "
        "times data parallel size (2)");
  CHECK(usage_error_with({"--train-samples", "100", "--global-batch-size", "20", "--rampup-batch-size", "2", "6", "24"}, 2) ==
        "--rampup-batch-size: the global batch size 2 that the ramp-up reaches is not divisible by micro batch size (2) "
        "times data parallel size (2)");
  CHECK(usage_error_with({"--train-samples", "100", "--global-batch-size", "16", "--rampup-batch-size", "4", "4"}) ==
        "--rampup-batch-size takes three values, START INCREMENT SAMPLES, not 2");
}
