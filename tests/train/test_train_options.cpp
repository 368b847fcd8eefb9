#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/megatron_flags.hpp"
#include "data/index_command_line.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/train_flags.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

const std::vector<std::string> kMinimal = {
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--max-position-embeddings", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--train-iters", "10",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};

TrainOptions parse(std::vector<std::string> args, int world_size = 1) {
  args.insert(args.begin(), "mgt-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), world_size);
}

TrainOptions parse_with(std::vector<std::string> extra, int world_size = 1) {
  std::vector<std::string> args = kMinimal;
  args.insert(args.end(), extra.begin(), extra.end());
  return parse(args, world_size);
}

// The usage error (exit code 2) that parsing `args` raises.
std::string usage_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  FAIL("no error");
  return {};
}

std::string usage_error_with(std::vector<std::string> extra) {
  std::vector<std::string> args = kMinimal;
  args.insert(args.end(), extra.begin(), extra.end());
  return usage_error(args);
}

std::vector<std::string> without(std::vector<std::string> args, const std::string& flag, int values) {
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i] == flag || args[i].rfind(flag + "=", 0) == 0) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 1 + values);
      break;
    }
  return args;
}

// A default as Python's repr prints it, to compare with Megatron's parser dump.
std::string py(const ArgValue& value) {
  struct Repr {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return python_float_repr(v); }
    std::string operator()(const std::string& v) const { return v.empty() ? "None" : "'" + v + "'"; }
    std::string operator()(const std::vector<std::string>& v) const {
      if (v.empty()) return "None";
      std::string items;
      for (const std::string& i : v) items += (items.empty() ? "'" : ", '") + i + "'";
      return "[" + items + "]";
    }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      std::string items;
      for (std::int64_t i : v) items += (items.empty() ? "" : ", ") + std::to_string(i);
      return "[" + items + "]";
    }
  };
  return std::visit(Repr{}, value);
}

std::string megatron_default(const std::string& flag) {
  auto f = find_megatron_flag(flag);
  REQUIRE(f);
  std::string d(f->default_);
  // store_true flags declared with default=None behave as False.
  if (d == "None" && f->action == "StoreTrueAction") return "False";
  return d;
}

}  // namespace

TEST_CASE("train options: defaults are Megatron's", "[train]") {
  TrainOptions o;  // before validation fills anything in
  int compared = 0;
  for (const FlagDefinition& flag : train_flags(o)) {
    if (!find_megatron_flag(flag.flag())) continue;  // mgt's own, or an older Megatron's
    INFO(flag.flag());
    // Megatron's default None becomes 'single' in validate_args; mgt starts there.
    if (flag.name() == "dataloader-type") {
      CHECK(megatron_default("--dataloader-type") == "None");
      CHECK(o.data.dataloader_type == "single");
      continue;
    }
    if (flag.name() == "no-data-sharding") {
      CHECK(megatron_default("--no-data-sharding") == "True");
      CHECK(o.data.data_sharding);
      continue;
    }
    // Megatron's default is the int 2**32 (argparse converts only typed values); the same number.
    if (flag.name() == "initial-loss-scale") {
      CHECK(megatron_default("--initial-loss-scale") == "4294967296");
      CHECK(o.optim.initial_loss_scale == 4294967296.0);
      continue;
    }
    CHECK(py(flag.value()) == megatron_default(flag.flag()));
    ++compared;
  }
  CHECK(compared > 100);
}

TEST_CASE("train options: the Megatron flag table is complete and sorted", "[train]") {
  auto flags = megatron_flags();
  CHECK(flags.size() == 503);
  for (std::size_t i = 1; i < flags.size(); ++i) CHECK(flags[i - 1].name < flags[i].name);
  CHECK(find_megatron_flag("--persistent-save-interval"));  // aliases have entries
  CHECK(find_megatron_flag("--help"));
  CHECK_FALSE(find_megatron_flag("--metrics-file"));
  CHECK_FALSE(find_megatron_flag("--exit-signal"));
}

TEST_CASE("train options: values and derived values", "[train]") {
  TrainOptions o = parse(kMinimal);
  CHECK_FALSE(o.show_help);
  CHECK(o.model.num_layers == 2);
  CHECK(o.model.ffn_hidden_size == 256);  // 4h
  CHECK(o.model.kv_channels == 16);       // h / heads
  CHECK(o.model.query_groups() == 4);     // one per head without GQA
  CHECK(o.optim.global_batch_size == 2);  // micro × DP
  CHECK(o.optim.start_weight_decay == 0.01);
  CHECK(o.optim.end_weight_decay == 0.01);
  CHECK(o.optim.lr == 1e-3);
  CHECK(o.total_train_iters() == 10);
  CHECK(o.num_microbatches() == 1);
  CHECK(o.data.tokenizer.vocab_size == 100);
  CHECK(o.parallel.data_parallel_size == 1);

  o = parse_with({"--swiglu", "--group-query-attention", "--num-query-groups", "2", "--disable-bias-linear",
                  "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--bf16",
                  "--global-batch-size", "8", "--untie-embeddings-and-output-weights"});
  CHECK(o.model.ffn_hidden_size == 128);  // int(4·64·2/3 / 64) · 64
  CHECK(o.model.query_groups() == 2);
  CHECK_FALSE(o.model.add_bias_linear);
  CHECK(o.model.normalization == "RMSNorm");
  CHECK(o.model.position_embedding_type == "rope");
  CHECK(o.optim.precision == Precision::Bf16);
  CHECK(o.num_microbatches() == 4);
  CHECK(o.model.untie_embeddings_and_output_weights);

  o = parse_with({"--global-batch-size", "8"}, 2);  // two data-parallel ranks
  CHECK(o.parallel.data_parallel_size == 2);
  CHECK(o.num_microbatches() == 2);

  // Tensor parallelism: 4 ranks as TP 2 x DP 2, with sequence parallelism kept.
  o = parse_with({"--tensor-model-parallel-size", "2", "--sequence-parallel", "--global-batch-size", "8"}, 4);
  CHECK(o.parallel.tensor_model_parallel_size == 2);
  CHECK(o.parallel.data_parallel_size == 2);
  CHECK(o.parallel.sequence_parallel);
  CHECK(o.num_microbatches() == 2);

  o = parse_with({"--recompute-activations", "--sequence-parallel", "--use-distributed-optimizer",
                  "--tensor-model-parallel-size", "1", "--fp16"});
  CHECK(o.model.recompute_granularity == "selective");
  CHECK_FALSE(o.parallel.sequence_parallel);  // cleared at TP 1, as Megatron does
  CHECK(o.parallel.use_distributed_optimizer);
  CHECK(o.optim.precision == Precision::Fp16);

  o = parse_with({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"});
  CHECK(o.model.recompute_method == "uniform");
}

TEST_CASE("train options: --distributed-backend chooses the transport's request", "[train]") {
  // Megatron's default; gloo (Megatron's other choice) and mpi ask for MPI (dist/transport_choice.hpp).
  CHECK(parse_with({}).parallel.distributed_backend == "nccl");
  CHECK(parse_with({"--distributed-backend", "gloo"}, 2).parallel.distributed_backend == "gloo");
  CHECK(parse_with({"--distributed-backend", "mpi"}).parallel.distributed_backend == "mpi");
  CHECK(parse_with({"--distributed-backend", "nccl"}).ignored_flags.empty());
  CHECK(usage_error_with({"--distributed-backend", "ucc"}) ==
        "--distributed-backend: 'ucc' is not one of nccl, gloo, mpi");
}

TEST_CASE("train options: argparse-style values", "[train]") {
  auto args = without(kMinimal, "--mock-data", 0);
  args.insert(args.end(), {"--data-path", "0.3", "a,b", "0.7", "c", "--split=90,5,5", "--lr-warmup-init", "-0.5",
                           "--data-cache-path=/tmp/x", "--save", "ckpt", "--persistent-save-interval", "5"});
  TrainOptions o = parse(args);
  CHECK(o.data.data_path == std::vector<std::string>{"0.3", "a,b", "0.7", "c"});
  CHECK(o.data.split == "90,5,5");
  CHECK(o.optim.lr_warmup_init == -0.5);  // a negative number is a value, not a flag
  CHECK(o.data.data_cache_path == "/tmp/x");
  CHECK(o.checkpoint.save_interval == 5);

  args.insert(args.end(), {"--data-path", "d"});  // argparse: the last occurrence wins
  o = parse(args);
  CHECK(o.data.data_path == std::vector<std::string>{"d"});
  CHECK(o.data.split == "90,5,5");

  o = parse(without(args, "--split", 0));
  CHECK(o.data.split == "969, 30, 1");     // Megatron's legacy default with --data-path

  o = parse_with({"--lr", "2e-4", "--seed", "7", "--lr", "3e-4"});  // last value wins
  CHECK(o.optim.lr == 3e-4);
  CHECK(o.optim.seed == 7);

  o = parse_with({"--exit-signal-handler", "--exit-signal", "SIGUSR1", "--metrics-file", "m.jsonl",
                  "--exit-duration-in-mins", "30", "--exit-interval", "50", "--log-throughput"});
  CHECK(o.logging.exit_signal == "SIGUSR1");
  CHECK(o.logging.metrics_file == "m.jsonl");
  CHECK(o.logging.exit_duration_in_mins == 30);
  CHECK(o.logging.exit_interval == 50);
  CHECK(o.logging.log_throughput);
}

TEST_CASE("train options: Megatron flags and unknown flags", "[train]") {
  CHECK(usage_error_with({"--fp32-residual-connection"}) ==
        "--fp32-residual-connection is a Megatron-LM flag that mgt-train does not support");
  CHECK(usage_error_with({"--num-layer", "2"}) == "unknown flag --num-layer (see --help)");
  CHECK(usage_error_with({"-x"}) == "unknown flag -x (see --help)");
  CHECK(usage_error_with({"stray"}) == "unexpected argument 'stray' (see --help)");
  CHECK(usage_error_with({"--swiglu=1"}) == "--swiglu takes no value");
  CHECK(usage_error_with({"--seed"}) == "--seed needs a value");
  CHECK(usage_error_with({"--seed", "--swiglu"}) == "--seed needs a value");
  CHECK(usage_error_with({"--seed", "x"}) == "--seed: 'x' is not an integer");
  CHECK(usage_error_with({"--seed", "1.5"}) == "--seed: '1.5' is not an integer");
  CHECK(usage_error_with({"--lr", "fast"}) == "--lr: 'fast' is not a number");
}

TEST_CASE("train options: every refused or unknown flag at once", "[train]") {
  CHECK(usage_error_with({"--moe-enable-deepep", "--batch-size", "4", "--no-such-flag",
                          "--checkpoint-activations", "--model-parallel-size", "2", "--activations-checkpoint-method",
                          "uniform", "--data-impl", "lazy", "--rerun-mode", "validate_results"}) ==
        "--moe-enable-deepep is not supported by mgt-train: DeepEP's dispatch kernels are not implemented; "
        "--moe-token-dispatcher-type alltoall moves the same tokens\n"
        "--batch-size is not supported by mgt-train: Megatron replaced it with --micro-batch-size\n"
        "unknown flag --no-such-flag (see --help)\n"
        "--checkpoint-activations is not supported by mgt-train: Megatron replaced it with --recompute-activations, "
        "or --recompute-granularity and --recompute-method for more control\n"
        "--model-parallel-size is not supported by mgt-train: Megatron replaced it with --tensor-model-parallel-size\n"
        "--activations-checkpoint-method is not supported by mgt-train: Megatron replaced it with --recompute-method\n"
        "--data-impl lazy is not supported by mgt-train: the old IndexedDataset format is not read; tokenize the "
        "corpus again with mgt-tokenize (mmap format)\n"
        "--rerun-mode validate_results is not supported by mgt-train: re-running iterations to check their results "
        "is Megatron's rerun state machine, which mgt lacks; drop the flag (mgt skips the step of an iteration whose "
        "loss or gradients are not finite)");
}

TEST_CASE("train options: flags of Megatron's Python runtime are accepted and named", "[train]") {
  const TrainOptions o = parse_with({"--use-mcore-models", "--num-workers", "8", "--manual-gc", "--manual-gc-interval",
                                     "10", "--empty-unused-memory-level", "1", "--no-mmap-bin-files",
                                     "--cross-entropy-loss-fusion", "--attention-backend", "flash",
                                     "--no-create-attention-mask-in-dataloader", "--data-impl", "mmap", "--ckpt-format", "torch_dist", "--use-flash-attn",
                                     "--no-async-tensor-model-parallel-allreduce", "--no-gradient-accumulation-fusion",
                                     "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion",
                                     "--no-rope-fusion", "--timing-log-level", "2", "--log-memory-to-tensorboard",
                                     "--rerun-mode", "disabled", "--no-clone-scatter-output-in-embedding"});
  std::vector<std::string> flags;
  for (const IgnoredFlagUse& u : o.ignored_flags) flags.push_back(u.flag);
  CHECK(flags == std::vector<std::string>{"--use-mcore-models", "--num-workers", "--manual-gc", "--manual-gc-interval",
                                          "--empty-unused-memory-level", "--no-mmap-bin-files",
                                          "--cross-entropy-loss-fusion", "--attention-backend",
                                          "--no-create-attention-mask-in-dataloader", "--data-impl", "--ckpt-format", "--use-flash-attn",
                                          "--no-async-tensor-model-parallel-allreduce",
                                          "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
                                          "--no-bias-dropout-fusion", "--no-rope-fusion",
                                          "--timing-log-level", "--log-memory-to-tensorboard", "--rerun-mode",
                                          "--no-clone-scatter-output-in-embedding"});
  const std::string line = ignored_flags_line("mgt-train", o.ignored_flags);
  CHECK(line.rfind("mgt-train: ignored flags (they change nothing here): --use-mcore-models (", 0) == 0);
  CHECK(line.find("; --num-workers 8 (mgt reads batches in its own prefetch thread);") != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  // Flags mgt-train implements are not in the line.
  CHECK(parse_with({"--use-distributed-optimizer", "--log-throughput", "--distributed-backend", "nccl"})
            .ignored_flags.empty());
  CHECK(!o.model.bias_gelu_fusion);
  // Values whose meaning cannot be kept are refused, saying why; argparse's choices still hold.
  CHECK(usage_error_with({"--ckpt-format", "zarr"}).rfind("--ckpt-format zarr is not supported by mgt-train: ", 0) == 0);
  CHECK(usage_error_with({"--attention-backend", "magic"}) ==
        "--attention-backend: invalid choice 'magic' (choose from flash, fused, unfused, local, auto)");
  CHECK(usage_error_with({"--empty-unused-memory-level", "3"}) ==
        "--empty-unused-memory-level: invalid choice '3' (choose from 0, 1, 2)");
  CHECK(usage_error_with({"--num-workers", "-1"}) == "--num-workers must be at least 0, got -1");
}

TEST_CASE("train options: Megatron's optional numerics that mgt always has are accepted and named", "[train]") {
  // The flags of many GPT and Llama launch scripts: what they ask for is what mgt computes.
  const std::vector<std::string> given = {"--attention-softmax-in-fp32", "--apply-query-key-layer-scaling",
                                          "--accumulate-allreduce-grads-in-fp32",
                                          "--no-check-for-nan-in-loss-and-grad", "--use-cpu-initialization"};
  const TrainOptions o = parse_with(given);
  std::vector<std::string> flags;
  for (const IgnoredFlagUse& u : o.ignored_flags) flags.push_back(u.flag);
  CHECK(flags == given);
  const std::string line = ignored_flags_line("mgt-train", o.ignored_flags);
  CHECK(line.find("--attention-softmax-in-fp32 (mgt's attention computes its masking and softmax in fp32 always)") !=
        std::string::npos);
  CHECK(line.find("stops after 10 in a row") != std::string::npos);
  // Megatron's choice between its grouped-GEMM implementations: mgt has one.
  const std::string grouped =
      ignored_flags_line("mgt-train", parse_with({"--moe-use-legacy-grouped-gemm"}).ignored_flags);
  CHECK(grouped.find("--moe-use-legacy-grouped-gemm (it picks among Megatron's grouped-GEMM implementations") !=
        std::string::npos);
  // Megatron-Core v0.13 ignores it too.
  CHECK(ignored_flags_line("mgt-train", parse_with({"--moe-extended-tp"}).ignored_flags)
            .find("--moe-extended-tp (Megatron-Core ignores it since v0.10") != std::string::npos);
  // --grad-reduce-in-bf16 still reduces in bf16 beside the fp32 flag, as in Megatron.
  CHECK(parse_with({"--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16"}).parallel.grad_reduce_in_bf16);
}

TEST_CASE("train options: loss scaling flags", "[train][loss_scaler]") {
  const TrainOptions d = parse(kMinimal);
  CHECK_FALSE(d.optim.loss_scale);
  CHECK(d.optim.initial_loss_scale == 4294967296.0);
  CHECK(d.optim.min_loss_scale == 1.0);
  CHECK(d.optim.loss_scale_window == 1000);
  CHECK(d.optim.hysteresis == 2);
  const TrainOptions o = parse_with({"--fp16", "--loss-scale", "4096", "--initial-loss-scale", "65536",
                                     "--min-loss-scale", "0.5", "--loss-scale-window", "200", "--hysteresis", "4"});
  CHECK(o.optim.loss_scale == 4096.0);
  CHECK(o.optim.initial_loss_scale == 65536.0);
  CHECK(o.optim.min_loss_scale == 0.5);
  CHECK(o.optim.loss_scale_window == 200);
  CHECK(o.optim.hysteresis == 4);
  CHECK(usage_error_with({"--loss-scale", "0"}) == "--loss-scale must be in (0, 3.40282e+38], got 0");
  CHECK(usage_error_with({"--loss-scale", "-8"}) == "--loss-scale must be in (0, 3.40282e+38], got -8");
  CHECK(usage_error_with({"--initial-loss-scale", "1e39"}) ==
        "--initial-loss-scale must be in (0, 3.40282e+38], got 1e39");
  CHECK(usage_error_with({"--min-loss-scale", "0"}) == "--min-loss-scale must be in (0, 3.40282e+38], got 0");
  CHECK(usage_error_with({"--loss-scale-window", "0"}) == "--loss-scale-window must be at least 1, got 0");
  CHECK(usage_error_with({"--hysteresis", "0"}) == "--hysteresis must be at least 1, got 0");
  CHECK(usage_error_with({"--hysteresis", "1.5"}).find("--hysteresis") == 0);
}

TEST_CASE("train options: TensorBoard flags", "[train]") {
  const TrainOptions d = parse(kMinimal);
  CHECK_FALSE(d.logging.tensorboard_dir);
  CHECK(d.logging.tensorboard_log_interval == 1);
  CHECK(d.logging.tensorboard_queue_size == 1000);
  CHECK(d.logging.log_learning_rate_to_tensorboard);
  CHECK(d.logging.log_loss_scale_to_tensorboard);
  CHECK_FALSE(d.logging.log_timers_to_tensorboard);
  CHECK_FALSE(d.logging.log_validation_ppl_to_tensorboard);
  CHECK_FALSE(d.logging.log_world_size_to_tensorboard);
  const TrainOptions o = parse_with({"--tensorboard-dir", "tb", "--tensorboard-log-interval", "5",
                                     "--tensorboard-queue-size", "10", "--log-timers-to-tensorboard",
                                     "--no-log-learning-rate-to-tensorboard", "--no-log-loss-scale-to-tensorboard",
                                     "--log-validation-ppl-to-tensorboard", "--log-world-size-to-tensorboard",
                                     "--log-batch-size-to-tensorboard"});
  CHECK(o.logging.tensorboard_dir == "tb");
  CHECK(o.logging.tensorboard_log_interval == 5);
  CHECK(o.logging.tensorboard_queue_size == 10);
  CHECK(o.logging.log_timers_to_tensorboard);
  CHECK_FALSE(o.logging.log_learning_rate_to_tensorboard);
  CHECK_FALSE(o.logging.log_loss_scale_to_tensorboard);
  CHECK(o.logging.log_validation_ppl_to_tensorboard);
  CHECK(o.logging.log_world_size_to_tensorboard);
  REQUIRE(o.ignored_flags.size() == 1);
  CHECK(o.ignored_flags[0].flag == "--log-batch-size-to-tensorboard");
  CHECK(usage_error_with({"--tensorboard-log-interval", "0"}) == "--tensorboard-log-interval must be at least 1, got 0");
  CHECK(usage_error_with({"--tensorboard-queue-size", "0"}) == "--tensorboard-queue-size must be at least 1, got 0");
}

TEST_CASE("train options: validation like Megatron's", "[train]") {
  CHECK(usage_error(without(kMinimal, "--lr", 1)) == "--lr is required");
  CHECK(usage_error(without(kMinimal, "--micro-batch-size", 1)) == "--micro-batch-size is required");
  CHECK(usage_error(without(kMinimal, "--num-layers", 1)) == "--num-layers is required");
  CHECK(usage_error(without(kMinimal, "--max-position-embeddings", 1)) == "--max-position-embeddings is required");
  CHECK(usage_error(without(kMinimal, "--train-iters", 1)) == "--train-iters or --train-samples is required");
  CHECK(usage_error_with({"--train-samples", "100"}) == "--train-iters and --train-samples are mutually exclusive");
  CHECK(usage_error_with({"--global-batch-size", "5"}) ==
        "global batch size (5) is not divisible by micro batch size (2) times data parallel size (1)");
  CHECK(usage_error_with({"--seq-length", "128"}) ==
        "max_position_embeddings (64) must be greater than or equal to seq_length (128)");
  CHECK(usage_error_with({"--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "2"}) ==
        "can only specify one of --lr-warmup-fraction and --lr-warmup-iters");
  CHECK(usage_error_with({"--lr-warmup-samples", "4"}) == "--lr-warmup-samples needs --train-samples (use --lr-warmup-iters)");
  CHECK(usage_error_with({"--lr-decay-samples", "4"}) == "--lr-decay-samples needs --train-samples (use --lr-decay-iters)");
  auto samples = without(kMinimal, "--train-iters", 1);
  samples.insert(samples.end(), {"--train-samples", "100", "--lr-decay-iters", "5"});
  CHECK(usage_error(samples) == "--lr-decay-iters needs --train-iters (use --lr-decay-samples)");
  auto too_few = without(kMinimal, "--train-iters", 1);
  too_few.insert(too_few.end(), {"--train-samples", "3", "--global-batch-size", "4"});
  CHECK(usage_error(too_few) == "--train-samples 3 is less than one global batch (--global-batch-size 4): no iteration would run");
  CHECK(usage_error_with({"--lr-warmup-iters", "10"}).find("warm-up must be shorter than the decay") != std::string::npos);
  CHECK(usage_error_with({"--min-lr", "0.1"}) == "--min-lr must not exceed --lr");
  CHECK(usage_error_with({"--lr-decay-style", "WSD"}) == "--lr-decay-style WSD needs --lr-wsd-decay-iters (or --lr-wsd-decay-samples)");
  CHECK(usage_error_with({"--lr-decay-style", "step"}) ==
        "--lr-decay-style: invalid choice 'step' (choose from constant, linear, cosine, inverse-square-root, WSD)");
  CHECK(usage_error_with({"--start-weight-decay", "0.1"}).find("--weight-decay-incr-style") != std::string::npos);
  CHECK(usage_error_with({"--weight-decay-incr-style", "linear"}) ==
        "--weight-decay-incr-style linear needs --start-weight-decay and --end-weight-decay");
  CHECK(usage_error_with({"--optimizer", "sgd"}) == "--optimizer sgd is not supported by mgt-train (adam only)");
  CHECK(usage_error_with({"--tensor-model-parallel-size", "2"}) ==
        "world size (1) is not divisible by tensor x pipeline x context parallel size (2)");
  CHECK(usage_error_with({"--tensor-model-parallel-size", "0"}) ==
        "--tensor-model-parallel-size must be between 1 and 2147483647, got 0");
  // Megatron's tensor-parallel divisibility checks, on 8 ranks.
  const auto tp_error = [](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--global-batch-size", "8"});
    try {
      parse_with(extra, 8);
    } catch (const Error& e) {
      CHECK(e.exit_code() == kExitUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(tp_error({"--tensor-model-parallel-size", "8", "--kv-channels", "16"}) ==
        "--num-attention-heads (4) must be divisible by --tensor-model-parallel-size (8)");
  CHECK(tp_error({"--tensor-model-parallel-size", "4", "--group-query-attention", "--num-query-groups", "2"}) ==
        "--num-query-groups (2) must be divisible by --tensor-model-parallel-size (4)");
  CHECK(tp_error({"--tensor-model-parallel-size", "4", "--ffn-hidden-size", "90"}) ==
        "--ffn-hidden-size (90) must be divisible by --tensor-model-parallel-size (4)");
  CHECK(tp_error({"--tensor-model-parallel-size", "4", "--sequence-parallel", "--seq-length", "30"}) ==
        "--sequence-parallel: --seq-length (30) must be divisible by --tensor-model-parallel-size (4)");
  CHECK(tp_error({"--tensor-model-parallel-size", "4", "--seq-length", "30"}) == "no error");
  // Megatron's split of the layers over pipeline stages, on 8 ranks (two layers).
  CHECK(tp_error({"--pipeline-model-parallel-size", "2"}) == "no error");
  CHECK(tp_error({"--pipeline-model-parallel-size", "4"}) ==
        "--num-layers (2) must be divisible by --pipeline-model-parallel-size (4), or give "
        "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers");
  CHECK(tp_error({"--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers", "2"}) ==
        "--num-layers 2, --decoder-first-pipeline-num-layers 2: the 0 remaining layers must divide evenly (at "
        "least one each) over the 1 other pipeline stage");
  // The embedding and the loss counted as layers (TransformerConfig, get_num_layers_to_build).
  CHECK(tp_error({"--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split"}) ==
        "--num-layers (2) plus the embedding (3) must be divisible by --pipeline-model-parallel-size (2)");
  CHECK(tp_error({"--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split",
                  "--account-for-loss-in-pipeline-split"}) == "no error");
  CHECK(tp_error({"--pipeline-model-parallel-size", "4", "--account-for-embedding-in-pipeline-split",
                  "--account-for-loss-in-pipeline-split"}) ==
        "--num-layers (2) over 4 pipeline stages, the embedding counted as a layer, leaves stage 0 no transformer "
        "layer: a stage of the embedding alone is not implemented in mgt-train");
  CHECK(tp_error({"--pipeline-model-parallel-size", "2", "--account-for-loss-in-pipeline-split",
                  "--decoder-first-pipeline-num-layers", "1"}) ==
        "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers cannot be set with "
        "--account-for-embedding-in-pipeline-split or --account-for-loss-in-pipeline-split");
  CHECK(usage_error_with({"--decoder-last-pipeline-num-layers", "1"}) ==
        "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers need "
        "--pipeline-model-parallel-size > 1");
  CHECK(usage_error_with({"--pipeline-model-parallel-size", "4"}) ==
        "world size (1) is not divisible by tensor x pipeline x context parallel size (4)");
  // Two chunks of one layer on one rank: interleaving needs a pipeline (arguments.py).
  CHECK(usage_error_with({"--num-layers-per-virtual-pipeline-stage", "1"}) ==
        "When interleaved schedule is used, --pipeline-model-parallel-size should be greater than 1");
  CHECK(usage_error_with({"--position-embedding-type", "relative"}) ==
        "--position-embedding-type relative is not supported by mgt-train (learned_absolute, rope or none)");
  CHECK(usage_error_with({"--group-query-attention", "--num-query-groups", "3"}) ==
        "--num-attention-heads (4) must be divisible by --num-query-groups (3)");
  CHECK(usage_error_with({"--hidden-size", "66"}) ==
        "--hidden-size (66) must be divisible by --num-attention-heads (4), or give --kv-channels");
  CHECK(usage_error_with({"--bf16", "--fp16"}) == "--bf16 and --fp16 are mutually exclusive");
  CHECK(usage_error_with({"--swiglu", "--openai-gelu"}) == "--swiglu and --openai-gelu are mutually exclusive");
  CHECK(usage_error_with({"--squared-relu", "--swiglu"}) == "--squared-relu and --swiglu are mutually exclusive");
  // Accepted-and-ignored flags keep Megatron's checks of their values and combinations.
  CHECK(usage_error_with({"--head-lr-mult", "abc"}) == "--head-lr-mult: 'abc' is not a number");
  CHECK(usage_error_with({"--ddp-num-buckets", "0"}) == "--ddp-num-buckets must be at least 1, got 0");
  CHECK(usage_error_with({"--ddp-num-buckets", "2", "--ddp-bucket-size", "1000"}) ==
        "Cannot specify both --ddp-num-buckets and --ddp-bucket-size");
  CHECK(usage_error_with({"--check-weight-hash-across-dp-replicas-interval", "0"}) ==
        "--check-weight-hash-across-dp-replicas-interval must be at least 1, got 0");
  CHECK(usage_error_with({"--wandb-project", "gpt"}) ==
        "--wandb-project needs --wandb-exp-name (Megatron: Please specify the wandb experiment name!)");
  CHECK(usage_error_with({"--wandb-project", "gpt", "--wandb-exp-name", ""}) ==
        "--wandb-project needs --wandb-exp-name (Megatron: Please specify the wandb experiment name!)");
  {
    std::vector<std::string> args = kMinimal;
    args.insert(args.end(), {"--wandb-project", "gpt", "--wandb-exp-name", "run-1", "--wandb-save-dir", "wb"});
    CHECK(parse(args).ignored_flags.size() == 3);
  }
  CHECK(usage_error_with({"--fp16-lm-cross-entropy"}) ==
        "--fp16-lm-cross-entropy: lm cross entropy in fp16 only support in fp16 mode.");
  CHECK(usage_error_with({"--deterministic-mode", "--use-flash-attn"}) ==
        "--deterministic-mode: Flash attention can not be used in deterministic mode.");
  CHECK(usage_error_with({"--deterministic-mode", "--cross-entropy-loss-fusion"}) ==
        "--deterministic-mode: Cross Entropy Fusion is currently not deterministic.");
  CHECK(usage_error_with({"--overlap-param-gather-with-optimizer-step"}) ==
        "--overlap-param-gather-with-optimizer-step only supported with distributed optimizer");
  CHECK(usage_error_with({"--squared-relu"}) ==
        "--squared-relu: when bias_activation_fusion is True, activation function should be either gelu or swiglu "
        "(Megatron's TransformerConfig): give --no-bias-gelu-fusion or --disable-bias-linear");
  for (const char* unfused : {"--disable-bias-linear", "--no-bias-gelu-fusion"}) {
    std::vector<std::string> args = kMinimal;
    args.insert(args.end(), {"--squared-relu", unfused});
    CHECK(gpt_config_from_options(parse(args), 64).activation == Activation::kSquaredRelu);
  }
  CHECK(usage_error_with({"--save", "ckpt"}) == "--save needs --save-interval");
  CHECK(usage_error_with({"--save", "", "--save-interval", "2"}) == "--save: the checkpoint directory is an empty path");
  CHECK(usage_error_with({"--load", ""}) == "--load: the checkpoint directory is an empty path");
  CHECK(usage_error_with({"--exit-signal", "SIGUSR1"}) == "--exit-signal needs --exit-signal-handler");
  CHECK(usage_error_with({"--exit-signal-handler", "--exit-signal", "SIGKILL"}).find("invalid choice 'SIGKILL'") !=
        std::string::npos);
  CHECK(usage_error_with({"--recompute-granularity", "full"}) == "--recompute-granularity full needs --recompute-method");
  CHECK(usage_error_with({"--recompute-activations", "--recompute-method", "block"}) ==
        "--recompute-method applies to --recompute-granularity full, not selective (Megatron: recompute method is not "
        "yet supported for selective recomputing granularity); for the old --checkpoint-activations with "
        "--activations-checkpoint-method, give --recompute-granularity full");
  CHECK(usage_error_with({"--recompute-granularity", "selective", "--recompute-num-layers", "1"}).rfind(
            "--recompute-num-layers applies to --recompute-granularity full, not selective", 0) == 0);
  CHECK(usage_error_with({"--no-position-embedding"}) ==
        "--no-position-embedding is deprecated, use --position-embedding-type (Megatron accepts it only with "
        "--position-embedding-type rope)");
  CHECK(usage_error_with({"--dataloader-type", "external"}) ==
        "--dataloader-type external is not supported by mgt-train (single or cyclic)");
  const TrainOptions cyclic = parse_with({"--dataloader-type", "cyclic", "--no-data-sharding"});
  CHECK(cyclic.data.dataloader_type == "cyclic");
  CHECK_FALSE(cyclic.data.data_sharding);
  CHECK(usage_error_with({"--data-path", "x"}) == "--mock-data and data paths are mutually exclusive");
  CHECK(usage_error(without(kMinimal, "--mock-data", 0)) == "--data-path (or --train-data-path, or --mock-data) is required");
  CHECK(usage_error(without(kMinimal, "--tokenizer-type", 1)) == "--tokenizer-type is required");
  CHECK(usage_error_with({"--save-interval", "5", "--persistent-save-interval", "5"}) ==
        "--save-interval and --persistent-save-interval are the same flag; give one");
  // Four data-parallel ranks with micro-batches of 2 need a multiple of 8.
  try {
    parse_with({"--global-batch-size", "6"}, 4);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "global batch size (6) is not divisible by micro batch size (2) times data parallel size (4)");
  }
}

TEST_CASE("train options: help and the mgt-index view of the data flags", "[train]") {
  TrainOptions h = parse({"--help"});
  CHECK(h.show_help);
  const std::string help = train_options_help();
  for (const char* flag : {"--num-layers", "--lr-decay-style", "--data-path", "--exit-signal", "--metrics-file",
                           "--tensor-model-parallel-size", "--tensorboard-dir", "--version", "--num-workers",
                           "--use-flash-attn"})
    CHECK(help.find(flag) != std::string::npos);

  auto args = without(kMinimal, "--mock-data", 0);
  args.insert(args.end(), {"--data-path", "corpus", "--eval-iters", "3", "--eval-interval", "5", "--seed", "9",
                           "--eod-mask-loss", "--data-cache-path", "cache"});
  IndexOptions x = index_options(parse(args));
  CHECK(x.data_path == std::vector<std::string>{"corpus"});
  CHECK(x.split == "969, 30, 1");
  CHECK(x.seq_length == 32);
  CHECK(x.seed == 9);
  CHECK(x.train_iters == 10);
  CHECK(x.global_batch_size == 2);
  CHECK(x.micro_batch_size == 2);
  CHECK(x.eval_iters == 3);
  CHECK(x.eval_interval == 5);
  CHECK(x.data_cache_path == "cache");
  CHECK(x.tokenizer.type == "NullTokenizer");
  CHECK(x.eod_mask_loss);
  CHECK(requested_samples(x) == std::array<std::int64_t, 3>{20, 18, 6});
}

TEST_CASE("train options: Megatron v0.13's leniencies for older scripts", "[train]") {
  // --no-position-embedding agrees with rope (Megatron's validate_args accepts the pair) and is
  // recorded as Megatron records it.
  const TrainOptions rope = parse_with({"--position-embedding-type", "rope", "--no-position-embedding"});
  CHECK_FALSE(rope.model.add_position_embedding);
  CHECK(rope.model.position_embedding_type == "rope");
  TrainOptions defaults;
  CHECK(find_flag(train_flags(defaults), "no-position-embedding").record_key() == "add_position_embedding");
  // --use-rotary-position-embeddings (Llama 2 recipes, with --no-position-embedding) sets rope,
  // over an explicit type too, as validate_args does.
  for (const std::vector<std::string>& given :
       {std::vector<std::string>{"--use-rotary-position-embeddings", "--no-position-embedding"},
        std::vector<std::string>{"--position-embedding-type", "learned_absolute", "--use-rotary-position-embeddings"}}) {
    const TrainOptions rotary = parse_with(given);
    CHECK(rotary.model.position_embedding_type == "rope");
    CHECK(gpt_config_from_options(rotary, 128).position_embedding_type == PositionEmbeddingType::kRope);
  }
  // The rename advice for --activations-checkpoint-method gives --recompute-method, which
  // without --recompute-granularity changes nothing in Megatron; so here.
  const TrainOptions method = parse_with({"--recompute-method", "uniform"});
  CHECK(method.model.recompute_method == "uniform");
  CHECK_FALSE(method.model.recompute_granularity);
  CHECK(parse_with({"--recompute-method", "block", "--recompute-num-layers", "1"}).model.recompute_num_layers == 1);
  CHECK(parse_with({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"})
            .model.recompute_granularity == "full");
}

// Megatron's validate_args for --context-parallel-size and --cp-comm-type, on 8 ranks.
TEST_CASE("train options: context parallelism", "[train][context-parallel]") {
  const auto error_on_8 = [](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--global-batch-size", "8"});
    try {
      parse_with(extra, 8);
    } catch (const Error& e) {
      CHECK(e.exit_code() == kExitUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const TrainOptions o = parse_with({"--context-parallel-size", "2", "--global-batch-size", "8"}, 8);
  CHECK(o.parallel.context_parallel_size == 2);
  CHECK(o.parallel.data_parallel_size == 4);
  CHECK(o.parallel.cp_comm_type == std::vector<std::string>{"p2p"});
  CHECK(o.num_microbatches() == 1);
  CHECK(error_on_8({"--context-parallel-size", "4", "--cp-comm-type", "p2p", "p2p"}) == "no error");
  CHECK(error_on_8({"--context-parallel-size", "2", "--cp-comm-type", "a2a"}) == "no error");
  CHECK(error_on_8({"--context-parallel-size", "2", "--cp-comm-type", "allgather"}) ==
        "--cp-comm-type allgather is not implemented (p2p, the ring, and a2a, all-to-all)");
  CHECK(error_on_8({"--context-parallel-size", "2", "--cp-comm-type", "p2p", "allgather"}) ==
        "--cp-comm-type allgather is not implemented (p2p, the ring, and a2a, all-to-all)");
  CHECK(error_on_8({"--context-parallel-size", "2", "--cp-comm-type", "p2p", "a2a"}) ==
        "--cp-comm-type: one type per layer is not implemented (give one type for all layers)");
  CHECK(error_on_8({"--context-parallel-size", "2", "--cp-comm-type", "a2a+p2p"}) ==
        "--cp-comm-type a2a+p2p is not implemented (p2p, the ring, and a2a, all-to-all)");
  CHECK(error_on_8({"--cp-comm-type", "ring"}) == "--cp-comm-type: expected p2p, a2a, allgather or a2a+p2p, got 'ring'");
  // CP 8 cuts the 32 tokens into 16 chunks of 2.
  CHECK(error_on_8({"--context-parallel-size", "8"}) == "no error");
  CHECK(error_on_8({"--context-parallel-size", "4", "--seq-length", "36"}) ==
        "--seq-length (36) must be divisible by 2 x --context-parallel-size (8): each sequence is cut into 2 x "
        "context-parallel-size equal chunks");
  // Under sequence parallelism each rank's s / CP tokens are split over the tensor-parallel ranks.
  CHECK(error_on_8({"--context-parallel-size", "2", "--tensor-model-parallel-size", "4", "--sequence-parallel",
                    "--seq-length", "36"}) ==
        "--sequence-parallel: --seq-length / --context-parallel-size (18) must be divisible by "
        "--tensor-model-parallel-size (4)");
  CHECK(error_on_8({"--context-parallel-size", "3"}) ==
        "world size (8) is not divisible by tensor x pipeline x context parallel size (3)");
}

TEST_CASE("train options: flags that need a GPU feature mgt lacks say so and what to do", "[train]") {
  for (const char* flag : {"--enable-cuda-graph", "--tp-comm-overlap", "--use-sharp", "--use-nccl-ub",
                           "--reuse-grad-buf-for-mxfp8-param-ag"}) {
    const std::string error = usage_error_with({flag});
    CAPTURE(flag, error);
    CHECK(error.rfind(std::string(flag) + " is not supported by mgt-train: ", 0) == 0);
  }
  CHECK(usage_error_with({"--enable-cuda-graph"}).find("mgt lacks") != std::string::npos);
  // FP8 recipes of other GPU generations and block scaling, refused with what they need.
  CHECK(usage_error_with({"--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "mxfp8"}).find("Blackwell") !=
        std::string::npos);
  CHECK(usage_error_with({"--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "blockwise"})
            .find("block scaling (1x128 and 128x128 blocks") != std::string::npos);
  // The switches are refused with the others of one command line, as every refusal is.
  CHECK(usage_error_with({"--enable-cuda-graph", "--use-sharp"}).find("\n--use-sharp is not supported by mgt-train: ") !=
        std::string::npos);
}

TEST_CASE("train options: Megatron's FP8 flags and their checks", "[train][fp8]") {
  CHECK(usage_error_with({"--fp8-format", "hybrid"}) ==
        "--fp8-format needs --bf16 or --fp16: FP8 GEMMs take their inputs from 16-bit activations");
  CHECK(usage_error_with({"--bf16", "--fp8-format", "hybrid", "--fp8-param-gather"}) ==
        "--fp8-param-gather needs --use-distributed-optimizer");
  CHECK(usage_error_with({"--bf16", "--fp8-format", "e5m2"}).find("--fp8-format: invalid choice 'e5m2'") !=
        std::string::npos);
  CHECK(usage_error_with({"--bf16", "--fp8-format", "hybrid", "--fp8-amax-history-len", "0"})
            .find("--fp8-amax-history-len") != std::string::npos);
}

TEST_CASE("train options: no abbreviations, as Megatron's pretraining parser (allow_abbrev=False)", "[train]") {
  CHECK(usage_error_with({"--seq-len", "32"}) == "unknown flag --seq-len (see --help)");
  CHECK(usage_error_with({"--micro-batch", "2"}) == "unknown flag --micro-batch (see --help)");
}

// mgt-index promises the indices mgt-train builds for the same flags: every flag the two share
// is one definition with one default.
TEST_CASE("mgt-index's flags are mgt-train's, with mgt-train's defaults", "[train][data]") {
  TrainOptions train_defaults;
  IndexOptions index_defaults;
  const std::vector<FlagDefinition> train = train_flags(train_defaults);
  const std::vector<FlagDefinition> index = index_flags(index_defaults);
  const auto shown_default = [](const FlagDefinition& f) {
    const std::string help = f.help();
    const auto at = help.rfind(" (default: ");
    return at == std::string::npos ? std::string() : help.substr(at);
  };
  std::vector<std::string> own;
  std::size_t shared = 0;
  for (const FlagDefinition& f : index) {
    const auto same = std::find_if(train.begin(), train.end(), [&](const FlagDefinition& t) { return t.name() == f.name(); });
    if (same == train.end()) {
      own.push_back(f.name());
      continue;
    }
    ++shared;
    CAPTURE(f.name());
    CHECK(f.value() == same->value());
    // Without the flag, both derive the global batch from the micro-batch; mgt-index, which has
    // no ranks, says so in its requirement (one data-parallel rank).
    if (f.name() != "global-batch-size") CHECK(shown_default(f) == shown_default(*same));
    CHECK(f.metavar() == same->metavar());
    CHECK(f.record_key() == same->record_key());
  }
  CHECK(own == std::vector<std::string>{"dump-samples", "dump-count"});
  CHECK(shared >= 25);
  // The defaults that decide the indices, as the two programs read them from no flags.
  CHECK(index_options(train_defaults).seed == index_defaults.seed);
  CHECK(index_options(train_defaults).eval_iters == index_defaults.eval_iters);
  CHECK(index_options(train_defaults).eval_interval == index_defaults.eval_interval);
  CHECK(index_options(train_defaults).mid_level_dataset_surplus == index_defaults.mid_level_dataset_surplus);
  CHECK(index_options(train_defaults).tokenizer.vocab_extra_ids == index_defaults.tokenizer.vocab_extra_ids);
}
