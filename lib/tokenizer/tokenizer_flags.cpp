#include "tokenizer/tokenizer_flags.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {

void add_tokenizer_flags(cxxopts::Options& options) {
  std::string types;
  for (const auto& t : supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  // clang-format off
  options.add_options("tokenizer (default: the one recorded in the checkpoint)")
      ("tokenizer-type", "One of: " + types, cxxopts::value<std::string>(), "TYPE")
      ("vocab-file", "Vocabulary file (alone: replaces the recorded path)", cxxopts::value<std::string>(), "FILE")
      ("merge-file", "GPT-2 BPE merges file (alone: replaces the recorded path)", cxxopts::value<std::string>(), "FILE")
      ("vocab-size", "Vocabulary size (NullTokenizer)", cxxopts::value<std::string>(), "N")
      ("vocab-extra-ids", "Extra <extra_id_i> tokens (BERT tokenizers)", cxxopts::value<std::string>(), "N");
  // clang-format on
}

std::optional<TokenizerOptions> given_tokenizer_flags(const FlagValues& f) {
  if (!f.has("tokenizer-type") && !f.has("vocab-file") && !f.has("merge-file") && !f.has("vocab-size") &&
      !f.has("vocab-extra-ids"))
    return std::nullopt;
  TokenizerOptions o;
  f.set("tokenizer-type", o.type);
  f.set("vocab-file", o.vocab_file);
  f.set("merge-file", o.merge_file);
  if (f.has("vocab-size")) o.vocab_size = f.integer("vocab-size");
  if (f.has("vocab-extra-ids")) {
    const std::int64_t extra = f.integer("vocab-extra-ids");
    if (extra < 0 || extra > 1000000) throw UsageError("--vocab-extra-ids must be between 0 and 1000000");
    o.vocab_extra_ids = static_cast<int>(extra);
  }
  return o;
}

}  // namespace mgt
