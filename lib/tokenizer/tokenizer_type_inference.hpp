// Older Megatron launch scripts give --vocab-file and --merge-file but no --tokenizer-type (the
// flag had no value to require before Megatron grew more tokenizers). GPT2BPETokenizer is the
// only tokenizer that reads a merges file, so the pair names it; the programs take it and say so
// on standard error instead of refusing the script.
#pragma once
#include <string_view>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

// When options.type is empty and both files are given, sets it to GPT2BPETokenizer and, with
// `say_so`, writes "PROGRAM: ..." saying so, one line on standard error. Returns whether it did.
bool infer_tokenizer_type_from_files(TokenizerOptions& options, std::string_view program, bool say_so = true);

}  // namespace mgt
