// The interleaved schedule's flags: how they give the model chunks per pipeline rank, and
// Megatron's checks (arguments.py, schedules.py) made before the run.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/train_options.hpp"
#include "train/virtual_pipeline_options.hpp"

using namespace mgt;

namespace {

// 8 layers, micro-batch 1, global batch 8: 8 micro-batches per iteration at DP 1.
TrainOptions parse(std::vector<std::string> extra, int world_size) {
  std::vector<std::string> args = {
      "mgt-train", "--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
      "--max-position-embeddings", "64", "--micro-batch-size", "1", "--global-batch-size", "8", "--lr", "1e-3",
      "--train-iters", "10", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), world_size);
}

std::string usage_error(std::vector<std::string> extra, int world_size) {
  try {
    parse(std::move(extra), world_size);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("mgt-train interleaved flags give the model chunks per pipeline rank", "[train]") {
  CHECK(parse({"--pipeline-model-parallel-size", "2"}, 2).parallel.virtual_pipeline_model_parallel_size == 1);
  // (8 / 2) / 1 = 4 chunks of one layer.
  CHECK(parse({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"}, 2)
            .parallel.virtual_pipeline_model_parallel_size == 4);
  CHECK(parse({"--pipeline-model-parallel-size", "4", "--num-virtual-stages-per-pipeline-rank", "2"}, 4)
            .parallel.virtual_pipeline_model_parallel_size == 2);
  // One chunk is the non-interleaved schedule, as Megatron's None.
  CHECK(parse({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "4"}, 2)
            .parallel.virtual_pipeline_model_parallel_size == 1);
  CHECK(schedule_description(parse({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank",
                                    "2", "--microbatch-group-size-per-virtual-pipeline-stage", "4"},
                                   2)
                                 .parallel) ==
        "interleaved 1F1B schedule, 2 model chunks per stage, micro-batch groups of 4");
}

TEST_CASE("mgt-train interleaved flags are checked as Megatron checks them", "[train]") {
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                          "--num-virtual-stages-per-pipeline-rank", "2"},
                         2),
             Catch::Contains("No more than one of"));
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "3"}, 2),
             Catch::Contains("must be divisible by --num-layers-per-virtual-pipeline-stage (3)"));
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                          "--decoder-first-pipeline-num-layers", "2"},
                         2),
             Catch::Contains("please use --num-virtual-stages-per-pipeline-rank"));
  CHECK_THAT(usage_error({"--num-virtual-stages-per-pipeline-rank", "2"}, 1), Catch::Contains("greater than 1"));
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "0"}, 2),
             Catch::Contains("must be at least 1"));
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "2", "--microbatch-group-size-per-virtual-pipeline-stage",
                          "2"},
                         2),
             Catch::Contains("needs the interleaved schedule"));
  // Groups of 3 at PP 2: the last group, 8 mod 3 = 2 micro-batches, is at least PP. At PP 4 a
  // group must be at least 4, and a last group of 8 mod 5 = 3 is too small.
  CHECK(parse({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
               "--microbatch-group-size-per-virtual-pipeline-stage", "3"},
              2)
            .parallel.virtual_pipeline_model_parallel_size == 2);
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "4", "--num-virtual-stages-per-pipeline-rank", "2",
                          "--microbatch-group-size-per-virtual-pipeline-stage", "3"},
                         4),
             Catch::Contains("must lie between --pipeline-model-parallel-size (4)"));
  CHECK_THAT(usage_error({"--pipeline-model-parallel-size", "4", "--num-virtual-stages-per-pipeline-rank", "2",
                          "--microbatch-group-size-per-virtual-pipeline-stage", "5"},
                         4),
             Catch::Contains("modulo --microbatch-group-size-per-virtual-pipeline-stage (5) is 3"));
  // PP 2 x DP 4: 2 micro-batches per iteration, one group of PP.
  CHECK(parse({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2"}, 8)
            .parallel.virtual_pipeline_model_parallel_size == 2);
}
