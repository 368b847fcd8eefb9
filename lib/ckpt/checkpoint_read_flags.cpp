#include "ckpt/checkpoint_read_flags.hpp"

#include "ckpt/model_checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "model/model_flags.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

namespace {

// Megatron's parallel sizes, refused unless 1: mgt reads every layout's checkpoint whole.
FlagDefinition only_one(const std::string& name, std::int64_t& field, const std::string& program) {
  const std::string flag = "--" + name;
  return custom_flag(
      name, FlagArity::One, "1", "Only 1: any checkpoint is read whole, whatever layout saved it",
      [&field, flag, program](const std::vector<std::string>& values) {
        field = parse_integer_flag(flag, values.front());
        if (field != 1)
          throw UsageError(flag + " " + values.front() + ": " + program +
                           " runs on one rank and reads any checkpoint whole; leave the flag out or give 1");
      },
      [] { return ArgValue(); });
}

// mgt-train's --make-vocab-size-divisible-by, parsed and range-checked as there, kept to be
// compared with the checkpoint's padded vocabulary.
FlagDefinition checked_vocab_padding(CheckpointReadFlags& c) {
  const FlagDefinition shared = find_flag(model_flags(c.shape), "make-vocab-size-divisible-by");
  return custom_flag(
      shared.name(), shared.arity(), "N", shared.description() + "; checked: must give the checkpoint's padded vocabulary",
      [shared, &c](const std::vector<std::string>& values) {
        shared.set(values);
        c.make_vocab_size_divisible_by = c.shape.make_vocab_size_divisible_by;
      },
      [] { return ArgValue(); });
}

}  // namespace

FlagDefinition checkpoint_load_flag(std::string& load) {
  return store("load", "DIR", load, "Checkpoint: a --save directory (latest iteration) or an iteration directory");
}

FlagDefinition ckpt_step_flag(std::optional<std::int64_t>& step) {
  return store("ckpt-step", "N", step, "Load the checkpoint of iteration N from --load instead of the one its tracker "
                                       "file names (0: the tracker's, as Megatron)");
}

// clang-format off
std::vector<FlagDefinition> checkpoint_read_flags(CheckpointReadFlags& c, const std::string& program) {
  return joined_flags({{
    ckpt_step_flag(c.ckpt_step),
    store_true("no-load-optim", c.no_load_optim, "Accepted: the optimizer state is never read"),
    store_true("no-load-rng", c.no_load_rng, "Accepted: the RNG state is never read"),
    store_true("use-checkpoint-args", c.use_checkpoint_args, "Accepted: the architecture is always read from the checkpoint"),
    only_one("tensor-model-parallel-size", c.tensor_model_parallel_size, program),
    only_one("pipeline-model-parallel-size", c.pipeline_model_parallel_size, program),
    checked_vocab_padding(c),
  }, precision_flags(c.precision)});
}
// clang-format on

void check_padded_vocab(const ModelCheckpoint& checkpoint, const Tokenizer& tokenizer,
                        const CheckpointReadFlags& flags) {
  if (!flags.make_vocab_size_divisible_by) return;
  const std::int64_t padded = padded_vocab_size(tokenizer.vocab_size(), *flags.make_vocab_size_divisible_by, 1);
  if (padded != checkpoint.config.padded_vocab_size)
    throw UsageError("--make-vocab-size-divisible-by " + std::to_string(*flags.make_vocab_size_divisible_by) +
                     " pads the vocabulary to " + std::to_string(padded) + ", but checkpoint " +
                     checkpoint.directory + " has " + std::to_string(checkpoint.config.padded_vocab_size));
}

void apply_precision_flag(Backend& backend, const CheckpointReadFlags& flags) {
  if (flags.precision == Precision::Fp32) return;
  const bool reduced = backend.set_matmul_precision(
      flags.precision == Precision::Bf16 ? Backend::MatmulPrecision::kBf16 : Backend::MatmulPrecision::kFp16);
  if (!reduced)
    log::warn(precision_flag_name(flags.precision) + ": the " + backend.name() + " backend computes in fp32 here");
}

}  // namespace mgt
