// Megatron's tokenizer flags. add_tokenizer_flags declares them all for the programs that run a
// checkpoint (mgt-eval, mgt-generate), where they are optional: the checkpoint records the
// tokenizer it was trained with. The model-file flags of the SentencePiece, HuggingFace and
// TikToken tokenizers are also declared on their own, for programs with their own tokenizer group.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "core/cxxopts_command_line.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// --tokenizer-type, --vocab-file, --merge-file, --vocab-size, --vocab-extra-ids and the
// model-file flags below, in group "tokenizer (default: the checkpoint's)".
void add_tokenizer_flags(cxxopts::Options& options);

// The flags given, or nullopt when none was.
std::optional<TokenizerOptions> given_tokenizer_flags(const FlagValues& flags);

// --tokenizer-model, --tiktoken-pattern, --tiktoken-num-special-tokens,
// --tiktoken-special-tokens in `group`.
void add_tokenizer_model_flags(cxxopts::Options& options, const std::string& group);

// Their multi-value arities, to merge into a program's list flags for declared_flags:
// --tiktoken-special-tokens takes several values (argparse nargs='+').
const std::map<std::string, FlagArity>& tokenizer_model_list_flags();

// Reads the model-file flags given into `options`; those absent keep their defaults.
void set_tokenizer_model_flags(const FlagValues& flags, TokenizerOptions& options);

// Whether any model-file flag was given.
bool has_tokenizer_model_flags(const FlagValues& flags);

}  // namespace mgt
