#include "ckpt/checkpoint_read_flags.hpp"

#include "ckpt/model_checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

void add_checkpoint_read_flags(cxxopts::Options& options) {
  // clang-format off
  options.add_options("checkpoint")
      ("no-load-optim", "Accepted: the optimizer state is never read")
      ("no-load-rng", "Accepted: the RNG state is never read")
      ("use-checkpoint-args", "Accepted: the architecture is always read from the checkpoint")
      ("tensor-model-parallel-size", "Only 1: any checkpoint is read whole, whatever layout saved it",
       cxxopts::value<std::string>(), "1")
      ("pipeline-model-parallel-size", "Only 1: any checkpoint is read whole, whatever layout saved it",
       cxxopts::value<std::string>(), "1")
      ("make-vocab-size-divisible-by", "Checked: must give the checkpoint's padded vocabulary",
       cxxopts::value<std::string>(), "N")
      ("bf16", "bf16 weights and activations on a GPU; accepted with a warning on the CPU, which computes in fp32")
      ("fp16", "fp16 weights and activations on a GPU; accepted with a warning on the CPU, which computes in fp32");
  // clang-format on
}

CheckpointReadFlags read_checkpoint_read_flags(const FlagValues& flags, const char* program) {
  for (const char* size : {"tensor-model-parallel-size", "pipeline-model-parallel-size"}) {
    if (flags.has(size) && flags.integer(size) != 1) {
      throw UsageError(std::string("--") + size + " " + flags.text(size) + ": " + program +
                       " runs on one rank and reads any checkpoint whole; leave the flag out or "
                       "give 1");
    }
  }
  CheckpointReadFlags read;
  if (flags.has("make-vocab-size-divisible-by")) {
    const std::int64_t n = flags.integer("make-vocab-size-divisible-by");
    if (n < 1) throw UsageError("--make-vocab-size-divisible-by must be at least 1, not " + std::to_string(n));
    read.make_vocab_size_divisible_by = n;
  }
  if (flags.has("bf16") && flags.has("fp16")) throw UsageError("--bf16 and --fp16 are mutually exclusive");
  if (flags.has("bf16")) read.precision_flag = "--bf16";
  if (flags.has("fp16")) read.precision_flag = "--fp16";
  return read;
}

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
  const bool reduced =
      flags.precision_flag &&
      backend.set_matmul_precision(*flags.precision_flag == "--bf16" ? Backend::MatmulPrecision::kBf16
                                                                     : Backend::MatmulPrecision::kFp16);
  if (flags.precision_flag && !reduced)
    log::warn(*flags.precision_flag + ": the " + backend.name() + " backend computes in fp32 here");
}

}  // namespace mgt
