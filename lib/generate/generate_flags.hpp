// mgt-generate's flags, each defined once (core/flag_table.hpp): parsing, --help and the per-flag
// checks read this table. Megatron's text-generation settings (tokens_to_generate, temperature,
// top_k, top_p, ...) are mgt-generate's own entries; the checkpoint, tokenizer, model-shape and
// compute flags are the definitions every program that takes them shares. --help and --version
// are not in it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/flag_table.hpp"
#include "generate/generate_job.hpp"
#include "model/model_shape_options.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// What the flags set: GenerateOptions with the command line's defaults, and the values that
// become its fields only once the command line is read whole.
struct GenerateFlagFields {
  GenerateFlagFields() { options.log_interval = 100; }  // Megatron's --log-interval

  GenerateOptions options;
  std::int64_t seed = 1234;  // Megatron's --seed; GenerationSettings keeps it unsigned
  TokenizerOptions tokenizer;
  ModelShapeOptions shape;
};

// The table bound to `fields`, which must outlive it.
std::vector<FlagDefinition> generate_flags(GenerateFlagFields& fields);

// The --help groups, in order.
std::vector<std::string> generate_flag_groups();

// The flags that mean something only for prompt files: with --server each request carries its
// own prompts and settings.
std::vector<std::string> per_request_flags();

}  // namespace mgt
