// Megatron's tokenizer flags, each defined once (core/flag_table.hpp) for every program that takes
// them. mgt-train, mgt-tokenize and mgt-index build a tokenizer from them; mgt-eval and
// mgt-generate read the checkpoint's and let the flags replace it.
#pragma once
#include <vector>

#include "core/flag_table.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

enum class TokenizerFlagsRole {
  kNamesTokenizer,      // the flags are the only source: --tokenizer-type is required (or inferred)
  kOverridesCheckpoint  // the checkpoint records a tokenizer; a flag given replaces its part of it
};

// The --help group of the tokenizer flags of a program that reads a checkpoint.
constexpr const char* kCheckpointTokenizerGroup = "tokenizer (default: the one recorded in the checkpoint)";

// --tokenizer-type, --vocab-file, --merge-file, --vocab-size, --vocab-extra-ids, then the
// model-file flags, bound to `options`, without a group.
std::vector<FlagDefinition> tokenizer_flags(TokenizerOptions& options, TokenizerFlagsRole role);

// --tokenizer-model, --tiktoken-pattern, --tiktoken-num-special-tokens, --tiktoken-special-tokens.
std::vector<FlagDefinition> tokenizer_model_flags(TokenizerOptions& options);

}  // namespace mgt
