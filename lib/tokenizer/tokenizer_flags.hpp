// Megatron's tokenizer flags for the programs that run a checkpoint (mgt-eval, mgt-generate),
// where they are optional: the checkpoint records the tokenizer it was trained with.
#pragma once
#include <optional>

#include "core/cxxopts_command_line.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// --tokenizer-type, --vocab-file, --merge-file, --vocab-size, --vocab-extra-ids in group
// "tokenizer (default: the checkpoint's)".
void add_tokenizer_flags(cxxopts::Options& options);

// The flags given, or nullopt when none was.
std::optional<TokenizerOptions> given_tokenizer_flags(const FlagValues& flags);

}  // namespace mgt
