#include "tokenizer/tokenizer_type_inference.hpp"

#include <cstdio>
#include <string>

namespace mgt {

bool infer_tokenizer_type_from_files(TokenizerOptions& options, std::string_view program, bool say_so) {
  if (!options.type.empty() || options.vocab_file.empty() || options.merge_file.empty()) return false;
  options.type = "GPT2BPETokenizer";
  if (!say_so) return true;
  const std::string name(program);
  std::fprintf(stderr,
               "%s: no --tokenizer-type given; --vocab-file and --merge-file select GPT2BPETokenizer, "
               "the tokenizer that reads a merges file\n",
               name.c_str());
  std::fflush(stderr);
  return true;
}

}  // namespace mgt
