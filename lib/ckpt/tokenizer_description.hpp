// What a checkpoint says about its tokenizer, as JSON text: enough to rebuild it and to check the
// vocabulary padding. Training and checkpoint conversion both write it.
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

// {"tokenizer_type", "class", "vocab_file", "merge_file", "vocab_size", "vocab_extra_ids",
//  "true_vocab_size", "padded_vocab_size", "eod", "pad"}.
std::string tokenizer_description_json(const TokenizerOptions& options, const Tokenizer& tokenizer,
                                       std::int64_t padded_vocab_size);

}  // namespace mgt
