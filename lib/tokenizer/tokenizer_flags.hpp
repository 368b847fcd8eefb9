// Megatron's tokenizer flags, each defined once (core/flag_table.hpp) for every program that takes
// them. mgt-train, mgt-tokenize and mgt-index build a tokenizer from them; mgt-eval and
// mgt-generate read the checkpoint's and let the flags replace it. The model-file flags of the
// SentencePiece, HuggingFace and TikToken tokenizers are also available on their own, declared
// in cxxopts, for programs whose tokenizer group is written by hand.
#pragma once
#include <map>
#include <vector>

#include "core/cxxopts_command_line.hpp"
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

// The model-file flags declared in `group` of a hand-written cxxopts command line.
void add_tokenizer_model_flags(cxxopts::Options& options, const std::string& group);

// Their multi-value arities, to merge into a program's list flags for declared_flags:
// --tiktoken-special-tokens takes several values (argparse nargs='+').
std::map<std::string, FlagArity> tokenizer_model_list_flags();

// Reads the model-file flags given into `options`; those absent keep their defaults.
void set_tokenizer_model_flags(const FlagValues& flags, TokenizerOptions& options);

}  // namespace mgt
