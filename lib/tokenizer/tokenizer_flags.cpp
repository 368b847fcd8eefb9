#include "tokenizer/tokenizer_flags.hpp"

#include <string>

namespace mgt {

// clang-format off
std::vector<FlagDefinition> tokenizer_flags(TokenizerOptions& o, TokenizerFlagsRole role) {
  std::string types;
  for (const auto& t : supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  const bool named = role == TokenizerFlagsRole::kNamesTokenizer;
  // Without the flag the checkpoint's file is used; with it alone, the recorded type reads it.
  const std::string replaces = named ? "" : " (alone: replaces the recorded path)";
  return joined_flags({{
    store("tokenizer-type", "TYPE", o.type, "One of: " + types +
          (named ? " (required, unless --vocab-file and --merge-file name GPT2BPETokenizer)" : "")),
    store("vocab-file", "FILE", o.vocab_file, "Vocabulary file" + replaces),
    store("merge-file", "FILE", o.merge_file, "GPT-2 BPE merges file" + replaces),
    store("vocab-size", "N", o.vocab_size, "Vocabulary size of NullTokenizer, or of TikTokenizer")
        .default_text("131072 for TikTokenizer"),
    store("vocab-extra-ids", "N", o.vocab_extra_ids, "Extra <extra_id_i> tokens (BERT and SentencePiece tokenizers)"),
  }, tokenizer_model_flags(o)});
}

std::vector<FlagDefinition> tokenizer_model_flags(TokenizerOptions& o) {
  return {
    store("tokenizer-model", "PATH", o.tokenizer_model,
          "SentencePiece .model file (SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer), "
          "tokenizer.json or its directory (HuggingFaceTokenizer), or ranks file (TikTokenizer)"),
    store("tiktoken-pattern", "V", o.tiktoken_pattern, "TikTokenizer regex: v1 or v2"),
    store("tiktoken-num-special-tokens", "N", o.tiktoken_num_special_tokens, "TikTokenizer ids reserved for special tokens"),
    store_list("tiktoken-special-tokens", "TOKEN...", o.tiktoken_special_tokens,
               "TikTokenizer special tokens (must include <unk> <s> </s>)"),
  };
}
// clang-format on

}  // namespace mgt
