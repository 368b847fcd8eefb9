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
#include <vector>

#include "core/compute_flags.hpp"
#include "core/flag_table.hpp"
#include "kernels/backend.hpp"
#include "model/model_shape_options.hpp"

namespace mgt {

struct ModelCheckpoint;
class Tokenizer;

struct CheckpointReadFlags {
  std::optional<std::int64_t> make_vocab_size_divisible_by;  // checked against the checkpoint
  Precision precision = Precision::Fp32;                     // --bf16 / --fp16
  // Accepted for Megatron's command lines; a checkpoint is read the same way with or without them.
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool use_checkpoint_args = false;
  std::optional<std::int64_t> ckpt_step;  // --ckpt-step: read this iteration of --load
  std::int64_t tensor_model_parallel_size = 1;    // only 1
  std::int64_t pipeline_model_parallel_size = 1;  // only 1
  // What --make-vocab-size-divisible-by parses into, by mgt-train's definition of the flag.
  ModelShapeOptions shape;
};

// --load DIR: the checkpoint a program reads. Callers say required() with what it is for.
FlagDefinition checkpoint_load_flag(std::string& load);
// --ckpt-step N: the iteration of --load's directory to read (ckpt::find_checkpoint_to_load).
FlagDefinition ckpt_step_flag(std::optional<std::int64_t>& step);

// The flags above, bound to `flags` (which must outlive the table), without a group; `program`
// names the program in refusals ("--tensor-model-parallel-size 2: mgt-eval runs on one rank ...").
// Give also check_one_precision_flag (core/compute_flags.hpp) the command line.
std::vector<FlagDefinition> checkpoint_read_flags(CheckpointReadFlags& flags, const std::string& program);

// --make-vocab-size-divisible-by must pad the tokenizer's vocabulary to the checkpoint's.
void check_padded_vocab(const ModelCheckpoint& checkpoint, const Tokenizer& tokenizer,
                        const CheckpointReadFlags& flags);
// --bf16 where the backend has bf16 storage; a warning otherwise (and for --fp16).
void apply_precision_flag(Backend& backend, const CheckpointReadFlags& flags);

}  // namespace mgt
