// The checkpoint-reading flags of Megatron's evaluation and generation command lines
// (tasks/main.py, tools/run_text_generation_server.py), shared by mgt-eval and mgt-generate so
// that a script passing them ports unchanged: the optimizer and RNG switches and
// --use-checkpoint-args are accepted (the architecture always comes from the checkpoint), the
// parallel sizes must be 1 (every layout reads any checkpoint whole), --make-vocab-size-
// divisible-by is checked against the checkpoint, and --bf16/--fp16 choose the precision.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/cxxopts_command_line.hpp"
#include "kernels/backend.hpp"

namespace mgt {

struct ModelCheckpoint;
class Tokenizer;

struct CheckpointReadFlags {
  std::optional<std::int64_t> make_vocab_size_divisible_by;  // checked against the checkpoint
  std::optional<std::string> precision_flag;                 // "--bf16" / "--fp16" when given
};

// Declares them in the group "checkpoint".
void add_checkpoint_read_flags(cxxopts::Options& options);
// Throws UsageError naming the flag (a parallel size other than 1, both precisions, …).
CheckpointReadFlags read_checkpoint_read_flags(const FlagValues& flags, const char* program);

// --make-vocab-size-divisible-by must pad the tokenizer's vocabulary to the checkpoint's.
void check_padded_vocab(const ModelCheckpoint& checkpoint, const Tokenizer& tokenizer,
                        const CheckpointReadFlags& flags);
// --bf16 where the backend has bf16 storage; a warning otherwise (and for --fp16).
void apply_precision_flag(Backend& backend, const CheckpointReadFlags& flags);

}  // namespace mgt
