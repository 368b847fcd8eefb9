#include "train/train_options.hpp"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "kernels/backend_factory.hpp"
#include "model/moe_flags.hpp"
#include "ckpt/checkpoint_args_flags.hpp"
#include "train/train_flags.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-train";

cxxopts::Options make_cxxopts() {
  cxxopts::Options options(kProgram, "Pretrain a GPT model with Megatron-LM's flags and defaults.");
  options.custom_help("--num-layers N --hidden-size N --num-attention-heads N --seq-length N "
                      "--max-position-embeddings N --micro-batch-size N --lr F (--train-iters N | "
                      "--train-samples N) (--data-path [W] PREFIX... | --mock-data) --tokenizer-type TYPE "
                      "[options]");
  // Declared first, so that --help lists it first in its group, as every program does.
  add_version_flag(options, "other");
  TrainOptions defaults;  // --help describes the defaults
  declare_flags(options, train_flags(defaults));
  options.add_options("other")("h,help", "Show this help");
  return options;
}

// What the values alone cannot tell: flags given together that exclude each other, or one given
// without the flag it needs.
void check_flags_given_together(const FlagValues& f) {
  check_one_precision_flag(f);
  // Megatron declares both names for one option; the later one on the line wins there too, but
  // giving both is almost certainly a mistake.
  if (f.has("save-interval") && f.has("persistent-save-interval"))
    throw UsageError("--save-interval and --persistent-save-interval are the same flag; give one");
  if (f.has("exit-signal") && !f.has("exit-signal-handler"))
    throw UsageError("--exit-signal needs --exit-signal-handler");
}

CommandLineRules train_command_line_rules() {
  CommandLineRules rules;
  TrainOptions defaults;
  rules.known = flag_arities(train_flags(defaults));
  rules.known["--version"] = FlagArity::None;  // answered before parsing (core/program_main.hpp)
  // Older Megatron's TensorBoard switches: core_v0.13 always writes the batch size.
  rules.ignored["--log-batch-size-to-tensorboard"] = {FlagArity::None, "batch-size is always written, as Megatron "
                                                      "core_v0.13 does", {}, false, {}};
  rules.ignored["--log-memory-to-tensorboard"] = {FlagArity::None, "mgt keeps no PyTorch memory statistics; no "
                                                  "mem-* scalars are written", {}, false, {}};
  for (const auto& [flag, reason] : refused_moe_flags()) rules.refused[flag] = reason;
  add_megatron_compatibility_flags(rules);
  return rules;
}

}  // namespace

TrainOptions parse_train_options(int argc, const char* const* argv, int world_size) {
  TrainOptions o = read_train_options(argc, argv);
  if (!o.show_help) validate_train_options(o, world_size);
  return o;
}

TrainOptions read_train_options(int argc, const char* const* argv, bool report_notes) {
  cxxopts::Options options = make_cxxopts();
  // --use-checkpoint-args: the model's flags from the checkpoint, before anything is parsed.
  TrainOptions defaults;
  const CheckpointArgsCommandLine with_checkpoint =
      command_line_with_checkpoint_args(std::vector<std::string>(argv + std::min(argc, 1), argv + argc),
                                        train_flags(defaults));
  if (report_notes)
    for (const std::string& line : with_checkpoint.lines) std::cout << line << "\n";
  std::vector<const char*> rewritten = {argc > 0 ? argv[0] : kProgram};
  for (const std::string& arg : with_checkpoint.args) rewritten.push_back(arg.c_str());
  ParsedCommandLine parsed = parse_command_line(options, static_cast<int>(rewritten.size()), rewritten.data(),
                                                train_command_line_rules(), kProgram);
  const cxxopts::ParseResult& result = parsed.flags;
  TrainOptions o;
  if (result.count("help")) {
    o.show_help = true;
    return o;
  }
  o.ignored_flags = std::move(parsed.ignored);
  const FlagValues flags(result);
  check_flags_given_together(flags);
  set_given_flags(train_flags(o), flags);
  infer_tokenizer_type_from_files(o.data.tokenizer, kProgram, report_notes);
  check_device_name(o.device);
  return o;
}

std::string train_options_help() {
  return make_cxxopts().help({"model", "training", "fp8", "data", "checkpointing", "logging", "parallelism", "moe", "other"}) +
         "\n" + ignored_flags_help(train_command_line_rules()) +
         "\nFlags are Megatron-LM's (pretrain_gpt.py), with its defaults; a Megatron flag that is "
         "not listed here is refused by name.\nSee man mgt-train(1).\n";
}

PipelineSplit pipeline_split(const ParallelOptions& p) {
  return {p.pipeline_model_parallel_size, p.decoder_first_pipeline_num_layers, p.decoder_last_pipeline_num_layers,
          p.virtual_pipeline_model_parallel_size, p.account_for_embedding_in_pipeline_split,
          p.account_for_loss_in_pipeline_split};
}

IndexOptions index_options(const TrainOptions& o) {
  IndexOptions x;
  static_cast<DatasetSourceOptions&>(x) = o.data;
  x.seq_length = o.model.seq_length;
  x.seed = o.optim.seed;
  x.train_samples = o.optim.train_samples;
  x.train_iters = o.optim.train_iters;
  x.global_batch_size = o.optim.global_batch_size;
  x.micro_batch_size = o.optim.micro_batch_size;
  x.rampup_batch_size = o.optim.rampup_batch_size;
  x.eval_iters = o.logging.eval_iters;
  x.eval_interval = o.logging.eval_interval;
  x.tokenizer = o.data.tokenizer;
  x.eod_mask_loss = o.data.eod_mask_loss;
  x.reset_position_ids = o.data.reset_position_ids;
  x.reset_attention_mask = o.data.reset_attention_mask;
  return x;
}

}  // namespace mgt
