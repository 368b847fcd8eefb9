// mgt-train's recomputation flags: --recompute-method and --recompute-num-layers reach the model
// configuration, uniform groups must divide each pipeline stage's layers, and --recompute-modules
// takes Megatron's names, refusing those mgt's layers cannot recompute with the reason.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/train_options.hpp"
#include "train_options_testing.hpp"

using namespace mgt;

namespace {

const std::vector<std::string> kModel = {
    "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--max-position-embeddings", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--train-iters", "10",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};

TrainOptions parse(std::vector<std::string> extra, int world_size = 1) {
  return train_testing::parse_with(kModel, std::move(extra), world_size);
}

std::string usage_error(std::vector<std::string> extra, int world_size = 1) {
  return train_testing::usage_error_with(kModel, std::move(extra), world_size);
}

}  // namespace

TEST_CASE("train options: --recompute-method and --recompute-num-layers shape full recomputation", "[train][recompute]") {
  GptConfig c = gpt_config_from_options(
      parse({"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "3"}), 128);
  CHECK(c.recompute_granularity == RecomputeGranularity::kFull);
  CHECK(c.recompute_method == RecomputeMethod::kBlock);
  CHECK(c.recompute_num_layers == 3);
  c = gpt_config_from_options(
      parse({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "2"}), 128);
  CHECK(c.recompute_method == RecomputeMethod::kUniform);
  CHECK(c.recompute_num_layers == 2);

  // Groups of 3 cannot tile 4 layers (Megatron's last group would index past them), nor groups
  // of 2 the 1 layer of each of 4 stages.
  CHECK(usage_error({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers",
                     "3"}) == "--recompute-method uniform: --recompute-num-layers (3) must divide the layers of each "
                              "pipeline stage (4): Megatron checkpoints whole groups of that many layers");
  CHECK(usage_error({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "2",
                     "--pipeline-model-parallel-size", "4"},
                    4) == "--recompute-method uniform: --recompute-num-layers (2) must divide the layers of each "
                          "pipeline stage (1): Megatron checkpoints whole groups of that many layers");
  // block: the first N layers of each stage, however many the stage has.
  CHECK_NOTHROW(parse({"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "2",
                       "--pipeline-model-parallel-size", "4"},
                      4));
}

TEST_CASE("train options: --recompute-modules as Megatron's, core_attn recomputed", "[train][recompute]") {
  CHECK(gpt_config_from_options(parse({"--recompute-granularity", "selective"}), 128).recompute_core_attention);
  CHECK(gpt_config_from_options(parse({"--recompute-activations", "--recompute-modules", "core_attn"}), 128)
            .recompute_core_attention);
  // Megatron's nargs='*' takes an empty list (nothing recomputed); mgt's lists need a value.
  CHECK(usage_error({"--recompute-granularity", "selective", "--recompute-modules"}) ==
        "--recompute-modules needs at least one value");
  // core_attn, layernorm and mlp as Megatron's; the list replaces the default.
  const GptConfig modules =
      gpt_config_from_options(parse({"--recompute-granularity", "selective", "--recompute-modules", "layernorm", "mlp"}), 128);
  CHECK_FALSE(modules.recompute_core_attention);
  CHECK(modules.recompute_layernorm);
  CHECK(modules.recompute_mlp);
  const GptConfig plain = gpt_config_from_options(parse({"--recompute-granularity", "selective"}), 128);
  CHECK_FALSE(plain.recompute_layernorm);
  CHECK_FALSE(plain.recompute_mlp);
  CHECK(gpt_config_from_options(parse({"--recompute-granularity", "selective", "--recompute-modules", "moe_act"}), 128)
            .recompute_moe_act);
  const GptConfig moe =
      gpt_config_from_options(parse({"--recompute-granularity", "selective", "--recompute-modules", "core_attn", "moe"}), 128);
  CHECK(moe.recompute_moe);
  CHECK(moe.recompute_core_attention);
  CHECK_FALSE(plain.recompute_moe);
  // With FP8 too, as Megatron allows them (a rerun forward records no amax: fp8_training.hpp).
  CHECK_NOTHROW(parse({"--recompute-granularity", "selective", "--recompute-modules", "mlp", "moe", "--bf16",
                       "--fp8-format", "hybrid"}));
  CHECK(usage_error({"--recompute-granularity", "selective", "--recompute-modules", "mla_up_proj"}).rfind(
            "--recompute-modules mla_up_proj: only with multi-latent attention", 0) == 0);
  CHECK(usage_error({"--recompute-granularity", "selective", "--recompute-modules", "attention"}) ==
        "--recompute-modules: invalid choice 'attention' (Megatron's are core_attn, moe_act, layernorm, mla_up_proj, "
        "mlp and moe)");
  // Megatron reads the modules under selective granularity only.
  CHECK_NOTHROW(parse({"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1",
                       "--recompute-modules", "mlp"}));
}
