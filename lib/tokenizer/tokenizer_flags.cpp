#include "tokenizer/tokenizer_flags.hpp"

#include <string>

namespace mgt {

void add_tokenizer_flags(cxxopts::Options& options) {
  std::string types;
  for (const auto& t : supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  const std::string group = "tokenizer (default: the one recorded in the checkpoint)";
  // clang-format off
  options.add_options(group)
      ("tokenizer-type", "One of: " + types, cxxopts::value<std::string>(), "TYPE")
      ("vocab-file", "Vocabulary file (alone: replaces the recorded path)", cxxopts::value<std::string>(), "FILE")
      ("merge-file", "GPT-2 BPE merges file (alone: replaces the recorded path)", cxxopts::value<std::string>(), "FILE")
      ("vocab-size", "Vocabulary size of NullTokenizer, or of TikTokenizer (default: 131072 for TikTokenizer)", cxxopts::value<std::string>(), "N")
      ("vocab-extra-ids", "Extra <extra_id_i> tokens (BERT and SentencePiece tokenizers)", cxxopts::value<std::string>(), "N");
  // clang-format on
  add_tokenizer_model_flags(options, group);
}

std::optional<TokenizerOptions> given_tokenizer_flags(const FlagValues& f) {
  if (!f.has("tokenizer-type") && !f.has("vocab-file") && !f.has("merge-file") && !f.has("vocab-size") &&
      !f.has("vocab-extra-ids") && !has_tokenizer_model_flags(f))
    return std::nullopt;
  TokenizerOptions o;
  f.set("tokenizer-type", o.type);
  f.set("vocab-file", o.vocab_file);
  f.set("merge-file", o.merge_file);
  if (f.has("vocab-size")) o.vocab_size = f.integer("vocab-size");
  // Within int: core/flag_ranges.cpp bounds it.
  if (f.has("vocab-extra-ids")) o.vocab_extra_ids = static_cast<int>(f.integer("vocab-extra-ids"));
  set_tokenizer_model_flags(f, o);
  return o;
}

void add_tokenizer_model_flags(cxxopts::Options& options, const std::string& group) {
  // clang-format off
  options.add_options(group)
      ("tokenizer-model", "SentencePiece .model file (SentencePieceTokenizer, GPTSentencePieceTokenizer, "
                          "Llama2Tokenizer), tokenizer.json or its directory (HuggingFaceTokenizer), or "
                          "ranks file (TikTokenizer)", cxxopts::value<std::string>(), "PATH")
      ("tiktoken-pattern", "TikTokenizer regex: v1 or v2", cxxopts::value<std::string>(), "V")
      ("tiktoken-num-special-tokens", "TikTokenizer ids reserved for special tokens",
       cxxopts::value<std::string>()->default_value("1000"), "N")
      ("tiktoken-special-tokens", "TikTokenizer special tokens (must include <unk> <s> </s>)",
       cxxopts::value<std::vector<std::string>>(), "TOKEN...");
  // clang-format on
}

const std::map<std::string, FlagArity>& tokenizer_model_list_flags() {
  static const std::map<std::string, FlagArity> lists = {{"--tiktoken-special-tokens", FlagArity::Many}};
  return lists;
}

void set_tokenizer_model_flags(const FlagValues& f, TokenizerOptions& o) {
  f.set("tokenizer-model", o.tokenizer_model);
  f.set("tiktoken-pattern", o.tiktoken_pattern);
  // Absent: the options' default (1000, Megatron's), whether or not a program declared one.
  // Within int: core/flag_ranges.cpp bounds it.
  if (f.has("tiktoken-num-special-tokens"))
    o.tiktoken_num_special_tokens = static_cast<int>(f.integer("tiktoken-num-special-tokens"));
  if (f.has("tiktoken-special-tokens")) o.tiktoken_special_tokens = f.list("tiktoken-special-tokens");
}

bool has_tokenizer_model_flags(const FlagValues& f) {
  return f.has("tokenizer-model") || f.has("tiktoken-pattern") || f.has("tiktoken-num-special-tokens") ||
         f.has("tiktoken-special-tokens");
}

}  // namespace mgt
