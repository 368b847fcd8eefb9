#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/moe_buffers.hpp"
#include "model/moe_config.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "model/moe_layer_pattern.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/train_options.hpp"
#include "train_options_testing.hpp"

using namespace mgt;

namespace {

// A model that takes experts: Megatron's MoE layers have no biases.
const std::vector<std::string> kMoeModel = {
    "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--max-position-embeddings", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--train-iters", "10",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--disable-bias-linear"};

TrainOptions parse_moe(std::vector<std::string> extra, int world_size = 1) {
  return train_testing::parse_with(kMoeModel, std::move(extra), world_size);
}

std::string moe_usage_error(std::vector<std::string> extra, int world_size = 1) {
  return train_testing::usage_error_with(kMoeModel, std::move(extra), world_size);
}

}  // namespace

TEST_CASE("moe options: Megatron's defaults", "[train][moe]") {
  const TrainOptions o = parse_moe({});
  CHECK_FALSE(o.moe.enabled());
  CHECK(o.moe.expert_model_parallel_size == 1);
  CHECK(o.moe.expert_tensor_parallel_size == 1);  // --tensor-model-parallel-size
  CHECK(o.moe.moe_router_topk == 2);
  CHECK(o.moe.moe_router_load_balancing_type == "aux_loss");
  CHECK(o.moe.moe_router_score_function == "softmax");
  CHECK(o.moe.moe_aux_loss_coeff == 0.0);
  CHECK_FALSE(o.moe.moe_z_loss_coeff);
  CHECK(o.moe.moe_router_bias_update_rate == 1e-3);
  CHECK(o.moe.moe_token_dispatcher_type == "allgather");
  CHECK(o.moe.moe_token_drop_policy == "probs");
  CHECK(o.moe.moe_layer_freq == "1");
  CHECK_FALSE(gpt_config_from_options(o, 128).moe.enabled());
}

TEST_CASE("moe options: the model configuration", "[train][moe]") {
  const TrainOptions o = parse_moe({"--num-experts", "8", "--moe-router-topk", "2", "--moe-aux-loss-coeff", "1e-2",
                                    "--moe-z-loss-coeff", "1e-3", "--moe-layer-freq", "([0]+[1])*2",
                                    "--moe-expert-capacity-factor", "1.5", "--moe-token-drop-policy", "position",
                                    "--moe-pad-expert-input-to-capacity", "--moe-router-pre-softmax",
                                    "--moe-router-topk-scaling-factor", "2.5", "--moe-shared-expert-intermediate-size",
                                    "96", "--moe-token-dispatcher-type", "alltoall", "--moe-per-layer-logging"});
  CHECK(o.moe.moe_ffn_hidden_size == 256);  // --ffn-hidden-size's 4h, as Megatron fills it in
  const GptConfig c = gpt_config_from_options(o, 128);
  const MoeConfig& m = c.moe;
  CHECK(m.enabled());
  CHECK(m.num_experts == 8);
  CHECK(m.layer_pattern == std::vector<bool>{false, true, false, true});
  CHECK_FALSE(m.is_moe_layer(0));
  CHECK(m.is_moe_layer(3));
  CHECK(m.num_moe_layers() == 2);
  CHECK(m.ffn_hidden_size == 256);
  CHECK(m.shared_expert_intermediate_size == 96);
  CHECK(m.aux_loss_coeff == 1e-2);
  CHECK(m.z_loss);
  CHECK(m.z_loss_coeff == 1e-3);
  CHECK(m.capacity_factor == 1.5);
  CHECK(m.drops_tokens());
  CHECK(m.pad_to_capacity);
  CHECK(m.drop_policy == MoeDropPolicy::kPosition);
  CHECK(m.pre_softmax);
  CHECK(m.topk_scaling_factor == 2.5);
  CHECK(m.dispatcher == MoeDispatcher::kAlltoall);
  CHECK(m.per_layer_logging);
  CHECK_FALSE(m.router_fp64);
  CHECK(gpt_config_from_options(parse_moe({"--num-experts", "4", "--moe-router-dtype", "fp64"}), 128).moe.router_fp64);
  CHECK_FALSE(gpt_config_from_options(parse_moe({"--num-experts", "4", "--moe-router-dtype", "fp32"}), 128).moe.router_fp64);

  // Megatron: 0 experts is a dense model; a negative capacity factor is no capacity.
  CHECK_FALSE(parse_moe({"--num-experts", "0"}).moe.enabled());
  const TrainOptions dropless = parse_moe({"--num-experts", "4", "--moe-expert-capacity-factor", "-1"});
  CHECK_FALSE(dropless.moe.moe_expert_capacity_factor);
  CHECK_FALSE(gpt_config_from_options(dropless, 128).moe.drops_tokens());
  CHECK(gpt_config_from_options(parse_moe({"--num-experts", "4", "--moe-layer-freq", "2"}), 128).moe.layer_pattern ==
        std::vector<bool>{true, false, true, false});
}

TEST_CASE("moe options: Megatron's checks", "[train][moe]") {
  CHECK(moe_usage_error({"--moe-ffn-hidden-size", "64"}) == "--moe-ffn-hidden-size needs --num-experts");
  CHECK(moe_usage_error({"--num-experts", "-1"}).find("--num-experts") == 0);
  CHECK(moe_usage_error({"--expert-model-parallel-size", "2"}) == "--expert-model-parallel-size needs --num-experts");
  CHECK(moe_usage_error({"--num-experts", "3", "--expert-model-parallel-size", "2"}, 2) ==
        "--num-experts (3) must be a multiple of --expert-model-parallel-size (2)");
  CHECK(moe_usage_error({"--num-experts", "4", "--expert-model-parallel-size", "4"}, 2) ==
        "--expert-model-parallel-size (4) must divide the data-parallel size (2)");
  // Both dispatchers move the tokens between expert-parallel ranks.
  CHECK(parse_moe({"--num-experts", "4", "--expert-model-parallel-size", "2"}, 2).moe.expert_model_parallel_size == 2);
  // Any expert tensor-parallel size whose expert grid (expert-tensor x EP x expert-data x PP)
  // tiles the world and that splits the experts' hidden units evenly.
  CHECK(parse_moe({"--num-experts", "4", "--expert-tensor-parallel-size", "2"}, 2).moe.expert_tensor_parallel_size == 2);
  CHECK(parse_moe({"--num-experts", "4", "--expert-tensor-parallel-size", "2", "--expert-model-parallel-size", "2"}, 4)
            .moe.expert_tensor_parallel_size == 2);
  CHECK(moe_usage_error({"--num-experts", "4", "--expert-tensor-parallel-size", "4"}, 2) ==
        "world size (2) is not divisible by --expert-tensor-parallel-size (4) x --expert-model-parallel-size (1) x "
        "--pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (4)");
  CHECK(moe_usage_error({"--num-experts", "4", "--expert-tensor-parallel-size", "2", "--moe-ffn-hidden-size", "33"},
                        2) == "--moe-ffn-hidden-size (33) must be divisible by --expert-tensor-parallel-size (2)");
  // Megatron's default expert tensor-parallel size is the tensor-parallel size.
  const TrainOptions tp = parse_moe({"--num-experts", "4", "--tensor-model-parallel-size", "2", "--sequence-parallel"}, 2);
  CHECK(tp.moe.expert_tensor_parallel_size == 2);
  CHECK(parse_moe({"--num-experts", "4", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                   "--expert-tensor-parallel-size", "1"}, 2).moe.expert_tensor_parallel_size == 1);
  // Whole experts spread over expert-parallel ranks across the tensor-parallel ones: Megatron's
  // expert grid (expert-tensor 1 x EP x expert-data x PP) must tile the world, whatever the
  // dense data-parallel size.
  const TrainOptions etp1 = parse_moe({"--num-experts", "4", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                                       "--expert-tensor-parallel-size", "1", "--expert-model-parallel-size", "2"},
                                      2);
  CHECK(etp1.moe.expert_model_parallel_size == 2);
  CHECK(etp1.parallel.data_parallel_size == 1);
  CHECK(moe_usage_error({"--num-experts", "4", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                         "--expert-tensor-parallel-size", "1", "--expert-model-parallel-size", "4"},
                        2) ==
        "world size (2) is not divisible by --expert-tensor-parallel-size (1) x --expert-model-parallel-size (4) x "
        "--pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (4)");
  // megatron/core/transformer/moe/moe_layer.py: no MoE training under tensor parallelism without
  // sequence parallelism.
  CHECK(moe_usage_error({"--num-experts", "4", "--tensor-model-parallel-size", "2"}, 2) ==
        "--num-experts with --tensor-model-parallel-size 2 needs --sequence-parallel (Megatron: MoE and tensor "
        "parallelism without sequence parallelism are refused in training)");
  CHECK(parse_moe({"--num-experts", "4", "--pipeline-model-parallel-size", "2"}, 2).parallel.pipeline_model_parallel_size == 2);
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-topk", "1"}) ==
        "--moe-router-topk 1 with the softmax score function needs --moe-router-pre-softmax (a softmax over one "
        "expert has a zero gradient)");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-topk", "5"}) ==
        "--moe-router-topk (5) must not exceed --num-experts (4)");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-group-topk", "2"}) ==
        "--moe-router-group-topk needs --moe-router-num-groups");
  CHECK(moe_usage_error({"--num-experts", "6", "--moe-router-group-topk", "1", "--moe-router-num-groups", "4"}) ==
        "--num-experts (6) must be divisible by --moe-router-num-groups (4)");
  CHECK(moe_usage_error({"--num-experts", "8", "--moe-router-group-topk", "3", "--moe-router-num-groups", "2"}) ==
        "--moe-router-group-topk (3) must not exceed --moe-router-num-groups (2)");
  CHECK(moe_usage_error({"--num-experts", "8", "--moe-router-group-topk", "1", "--moe-router-num-groups", "4",
                         "--moe-router-topk", "3"}) ==
        "--moe-router-topk (3) must not exceed the experts of --moe-router-group-topk groups (2)");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-pad-expert-input-to-capacity"}) ==
        "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-shared-expert-intermediate-size", "32",
                         "--moe-shared-expert-overlap"}) ==
        "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall");
  // --delay-wgrad-compute: where mgt has weight gradients to delay (the grouped experts' under
  // expert parallelism with the all-to-all), else refused rather than ignored.
  const std::string delay_needs =
      "--delay-wgrad-compute needs --num-experts with --expert-model-parallel-size > 1, --moe-token-dispatcher-type "
      "alltoall and --moe-grouped-gemm, without --fp8-format (mgt delays the grouped experts' weight gradients beside "
      "the all-to-all)";
  const std::vector<std::string> delayed = {"--num-experts", "4", "--expert-model-parallel-size", "2",
                                            "--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm", "--bf16",
                                            "--delay-wgrad-compute"};
  const TrainOptions delaying = parse_moe(delayed, 2);
  CHECK(delaying.moe.delay_wgrad_compute);
  CHECK(gpt_config_from_options(delaying, 128).moe.delay_wgrad_compute);
  CHECK_FALSE(gpt_config_from_options(parse_moe({"--num-experts", "4"}), 128).moe.delay_wgrad_compute);
  CHECK(moe_usage_error({"--delay-wgrad-compute"}) == delay_needs);
  for (std::size_t left_out : {2, 4, 6}) {  // the expert-parallel size, the dispatcher, the grouped GEMM
    std::vector<std::string> missing = delayed;
    missing.erase(missing.begin() + static_cast<std::ptrdiff_t>(left_out),
                  missing.begin() + static_cast<std::ptrdiff_t>(left_out == 6 ? left_out + 1 : left_out + 2));
    CHECK(moe_usage_error(missing, 2) == delay_needs);
  }
  std::vector<std::string> fp8 = delayed;
  fp8.insert(fp8.end(), {"--fp8-format", "hybrid"});
  CHECK(moe_usage_error(fp8, 2) == delay_needs);
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-enable-expert-bias"}) ==
        "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-grouped-gemm"}) ==
        "--moe-grouped-gemm needs --bf16 (Megatron: GroupedGEMM for MoE only supports bf16)");
  // --moe-layer-recompute: Megatron's TransformerConfig adds moe to the modules (core_attn by
  // default) under selective granularity.
  const TrainOptions layer_recompute = parse_moe({"--num-experts", "4", "--moe-layer-recompute"});
  CHECK(layer_recompute.model.recompute_granularity == "selective");
  CHECK(*layer_recompute.model.recompute_modules == std::vector<std::string>{"core_attn", "moe"});
  const TrainOptions with_modules =
      parse_moe({"--num-experts", "4", "--moe-layer-recompute", "--recompute-modules", "layernorm", "moe",
                 "--recompute-granularity", "selective"});
  CHECK(*with_modules.model.recompute_modules == std::vector<std::string>{"layernorm", "moe"});
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-layer-recompute", "--recompute-granularity", "full",
                         "--recompute-method", "uniform", "--recompute-num-layers", "1"})
            .find("--moe-layer-recompute and --recompute-granularity full are mutually exclusive") == 0);
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-layer-freq", "[1,0]"}) ==
        "--moe-layer-freq: the pattern has 2 entries, --num-layers is 4");
  // Megatron's sinkhorn routing: no auxiliary loss, no capacity.
  CHECK(parse_moe({"--num-experts", "4", "--moe-router-load-balancing-type", "sinkhorn", "--moe-router-topk", "1"})
            .moe.moe_router_load_balancing_type == "sinkhorn");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-load-balancing-type", "sinkhorn", "--moe-aux-loss-coeff",
                         "0.01"}) ==
        "--moe-router-load-balancing-type sinkhorn needs --moe-aux-loss-coeff 0 (Megatron: Sinkhorn routing does not "
        "support aux loss.)");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-load-balancing-type", "sinkhorn",
                         "--moe-expert-capacity-factor", "1.0"})
            .find("--moe-expert-capacity-factor with --moe-router-load-balancing-type sinkhorn") == 0);
  const std::string flex = moe_usage_error({"--num-experts", "4", "--moe-token-dispatcher-type", "flex"});
  CHECK(flex.find("--moe-token-dispatcher-type flex is not supported by mgt-train") == 0);
  CHECK(flex.find("DeepEP") != std::string::npos);
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-router-dtype", "bf16"}).find("--moe-router-dtype") == 0);
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-input-jitter-eps", "1"}).find(
            "--moe-input-jitter-eps (1.000000) must be in [0, 1)") == 0);

  // Biased linears: Megatron's TransformerConfig asserts that MoE layers have none.
  std::vector<std::string> args = {"mgt-train"};
  for (const auto& a : kMoeModel)
    if (a != "--disable-bias-linear") args.push_back(a);
  args.insert(args.end(), {"--num-experts", "4"});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  CHECK_THROWS_WITH(parse_train_options(static_cast<int>(argv.size()), argv.data(), 1),
                    "--num-experts needs --disable-bias-linear (Megatron: bias is not supported for MoE)");
}

TEST_CASE("moe options: flags refused by name", "[train][moe]") {
  CHECK(moe_usage_error({"--moe-enable-deepep"}).find("--moe-enable-deepep is not supported by mgt-train: DeepEP") == 0);
  // All at once, as for the other refused flags.
  CHECK(moe_usage_error({"--moe-enable-deepep", "--moe-deepep-num-sms", "8"}).find('\n') != std::string::npos);
}

TEST_CASE("moe layer pattern: Megatron's --moe-layer-freq", "[model][moe]") {
  CHECK(moe_layer_pattern("1", 3) == std::vector<bool>{true, true, true});
  CHECK(moe_layer_pattern("3", 7) == std::vector<bool>{true, false, false, true, false, false, true});
  CHECK(moe_layer_pattern("([1]*3+[0]*1)*3", 12) ==
        std::vector<bool>{true, true, true, false, true, true, true, false, true, true, true, false});
  CHECK(moe_layer_pattern("([0]+[1]*23)", 24).front() == false);
  CHECK(moe_layer_pattern("2*[1,0]", 4) == std::vector<bool>{true, false, true, false});
  CHECK(moe_layer_pattern("[1,0,]", 2) == std::vector<bool>{true, false});
  CHECK(moe_layer_pattern("[1]*(1+1)", 2) == std::vector<bool>{true, true});
  CHECK_THROWS_WITH(moe_layer_pattern("0", 2), "--moe-layer-freq: 0 must be at least 1");
  CHECK_THROWS_WITH(moe_layer_pattern("x", 2), "--moe-layer-freq: 'x' is neither an integer nor a list expression");
  CHECK_THROWS_WITH(moe_layer_pattern("[1, 0]", 2), "--moe-layer-freq: invalid pattern '[1, 0]': only digits and , "
                                                    "[ ] ( ) + * are allowed");
  CHECK_THROWS_WITH(moe_layer_pattern("[1]+1", 2), "--moe-layer-freq: invalid pattern '[1]+1': + of a list and an integer");
  CHECK_THROWS_WITH(moe_layer_pattern("[1]*[1]", 2), "--moe-layer-freq: invalid pattern '[1]*[1]': * of two lists");
  CHECK_THROWS_WITH(moe_layer_pattern("[[1]]", 1), "--moe-layer-freq: invalid pattern '[[1]]': a list inside a list");
  CHECK_THROWS_WITH(moe_layer_pattern("([1]", 1), "--moe-layer-freq: invalid pattern '([1]': expected ')'");
  CHECK_THROWS_WITH(moe_layer_pattern("[2,1]", 2),
                    "--moe-layer-freq: the pattern's entries must be 0 (dense) or 1 (MoE), got 2");
  CHECK_THROWS_WITH(moe_layer_pattern("[1]*99999999", 1), "--moe-layer-freq: invalid pattern '[1]*99999999': the list "
                                                          "is too long");
}

TEST_CASE("moe config: Megatron's expert capacity", "[model][moe]") {
  CHECK(expert_capacity(16 * 2, 4, 1.0, 16) == 8);
  CHECK(expert_capacity(10 * 2, 4, 1.5, 10) == 8);   // ceil(7.5)
  CHECK(expert_capacity(10 * 2, 4, 10.0, 10) == 10); // at most every token
  CHECK(expert_capacity(10, 4, 0.0, 10) == 0);
}

TEST_CASE("moe config: the checkpoint's record of the flags gives the MoE model back", "[train][moe]") {
  const TrainOptions o = parse_moe({"--num-experts", "4", "--moe-router-topk", "3", "--moe-layer-freq", "[1,0,1,1]",
                                    "--moe-expert-capacity-factor", "1.25", "--moe-token-drop-policy", "position",
                                    "--moe-router-score-function", "sigmoid", "--moe-shared-expert-intermediate-size",
                                    "16", "--moe-router-topk-scaling-factor", "2.0", "--moe-ffn-hidden-size", "24"});
  const GptConfig c = gpt_config_from_options(o, 128);
  const GptConfig back = gpt_config_from_args_json(model_args_json(c), "the test's arguments");
  CHECK(back.moe.num_experts == 4);
  CHECK(back.moe.topk == 3);
  CHECK(back.moe.layer_pattern == std::vector<bool>{true, false, true, true});
  CHECK(back.moe.ffn_hidden_size == 24);
  CHECK(back.moe.shared_expert_intermediate_size == 16);
  CHECK(back.moe.capacity_factor == 1.25);
  CHECK(back.moe.drop_policy == MoeDropPolicy::kPosition);
  CHECK(back.moe.score_function == MoeScoreFunction::kSigmoid);
  CHECK(back.moe.topk_scaling_factor == 2.0);
  CHECK(back.num_parameters() == c.num_parameters());
}

// --moe-apply-probs-on-input changes what the model computes: recorded and read back.
// --moe-router-force-load-balancing is a benchmarking aid of training: a checkpoint's record of it
// (mgt-train records every flag) does not make mgt-eval and mgt-generate route at random.
TEST_CASE("moe config: probabilities on the input are read back, forced routing is not", "[train][moe]") {
  const TrainOptions o = parse_moe({"--num-experts", "4", "--moe-router-topk", "1", "--moe-router-score-function",
                                    "sigmoid", "--moe-apply-probs-on-input", "--moe-router-force-load-balancing"});
  const GptConfig c = gpt_config_from_options(o, 128);
  CHECK(c.moe.apply_probs_on_input);
  CHECK(c.moe.force_load_balancing);
  std::string json = model_args_json(c);
  json.insert(1, "\"moe_router_force_load_balancing\": true, ");
  const GptConfig back = gpt_config_from_args_json(json, "the test's arguments");
  CHECK(back.moe.apply_probs_on_input);
  CHECK_FALSE(back.moe.force_load_balancing);
}

TEST_CASE("moe options: FP8 with experts, and Megatron's checks of --moe-router-padding-for-fp8", "[train][moe][fp8]") {
  const std::vector<std::string> experts = {"--num-experts", "4", "--moe-token-dispatcher-type", "alltoall"};
  const std::vector<std::string> fp8 = {"--bf16", "--fp8-format", "hybrid"};
  std::vector<std::string> both = experts;
  both.insert(both.end(), fp8.begin(), fp8.end());
  const TrainOptions o = parse_moe(both);
  const GptConfig c = gpt_config_from_options(o, 128);
  CHECK(c.fp8.has_value());
  CHECK(c.moe.enabled());
  CHECK(moe_expert_row_multiple(c) == 16);
  // The flag is accepted where Megatron accepts it: padding is mgt's under FP8 anyway.
  std::vector<std::string> padded = both;
  padded.push_back("--moe-router-padding-for-fp8");
  CHECK(parse_moe(padded).moe.moe_router_padding_for_fp8);
  std::vector<std::string> without_fp8 = experts;
  without_fp8.push_back("--moe-router-padding-for-fp8");
  CHECK(moe_usage_error(without_fp8) ==
        "--moe-router-padding-for-fp8 needs --fp8-format (Megatron: fp8 must be specified)");
  const std::vector<std::string> allgather = {"--num-experts", "4", "--moe-token-dispatcher-type", "allgather", "--bf16",
                                              "--fp8-format", "hybrid", "--moe-router-padding-for-fp8"};
  CHECK(moe_usage_error(allgather).find("--moe-router-padding-for-fp8 with --moe-token-dispatcher-type allgather") == 0);
  std::vector<std::string> param_gather = both;
  param_gather.insert(param_gather.end(), {"--use-distributed-optimizer", "--fp8-param-gather"});
  // The experts' FP8 weights are gathered over the expert-data-parallel group as the others are.
  CHECK(parse_moe(param_gather).fp8.param_gather);
  std::vector<std::string> split = both;
  split.insert(split.end(), {"--expert-tensor-parallel-size", "2"});
  INFO(moe_usage_error(split, 2));
  CHECK(moe_usage_error(split, 2).find("--fp8-format with --expert-tensor-parallel-size 2: not supported by mgt-train") ==
        0);
}

TEST_CASE("moe options: --moe-use-upcycling's checks", "[train][moe]") {
  const std::vector<std::string> dirs = {"--load", "dense", "--save", "moe", "--save-interval", "5"};
  auto with_dirs = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), dirs.begin(), dirs.end());
    return extra;
  };
  // Megatron's validate_args: the optimizer and random state of the dense run are not loaded.
  const TrainOptions o = parse_moe(with_dirs({"--num-experts", "4", "--moe-use-upcycling"}));
  CHECK(o.moe.moe_use_upcycling);
  CHECK(o.moe.moe_upcycling_granularity == 1);
  CHECK(o.checkpoint.no_load_optim);
  CHECK(o.checkpoint.no_load_rng);
  // Fine-grained: a dense MLP of 2 x 256 units cut in two for 4 experts of 256.
  CHECK(parse_moe(with_dirs({"--num-experts", "4", "--moe-use-upcycling", "--moe-upcycling-granularity", "2"}))
            .moe.moe_upcycling_granularity == 2);

  CHECK(moe_usage_error({"--moe-use-upcycling", "--load", "dense", "--save", "moe"}) ==
        "--moe-use-upcycling needs --num-experts (the MoE model to upcycle into)");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-use-upcycling", "--load", "dense"}) ==
        "--moe-use-upcycling needs --save (Megatron: When using upcycling, the --save option must be specified.)");
  CHECK(moe_usage_error({"--num-experts", "4", "--moe-use-upcycling", "--save", "moe"}) ==
        "--moe-use-upcycling needs --load, the dense model's checkpoint");
  CHECK(moe_usage_error(with_dirs({"--num-experts", "4", "--moe-use-upcycling", "--openai-gelu"}))
            .find("--moe-use-upcycling with --openai-gelu") == 0);
  // 3 slices of the dense MLP do not share out over 4 experts.
  CHECK(moe_usage_error(with_dirs({"--num-experts", "4", "--moe-use-upcycling", "--moe-upcycling-granularity", "3"}))
            .find("--moe-use-upcycling: --num-experts (4) must be divisible by the granularity") == 0);
  // Experts of 96 units do not cut a dense MLP of 256.
  CHECK(moe_usage_error(with_dirs({"--num-experts", "4", "--moe-use-upcycling", "--moe-ffn-hidden-size", "96"}))
            .find("--moe-use-upcycling: the dense model's ffn hidden size (256) must be divisible by the experts' "
                  "(96)") == 0);
  CHECK(moe_usage_error(with_dirs({"--num-experts", "4", "--moe-use-upcycling", "--moe-upcycling-granularity", "0"}))
            .find("--moe-upcycling-granularity") != std::string::npos);
}
