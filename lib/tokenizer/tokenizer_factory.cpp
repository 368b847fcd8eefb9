// Megatron's build_tokenizer for the --tokenizer-type values mgt implements, and its padded
// vocabulary size.
#include <algorithm>
#include <array>
#include <filesystem>
#include <string_view>

#include "core/error.hpp"
#include "tokenizer/bert_wordpiece_tokenizer.hpp"
#include "tokenizer/gpt2_bpe_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/null_tokenizer.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "tokenizer/tiktoken_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {
namespace {

// Megatron v0.13 --tokenizer-type choices that mgt refuses rather than approximates.
constexpr std::array<std::string_view, 3> kUnsupportedMegatronTypes = {
    "MultimodalTokenizer", "NullMultimodalTokenizer", "SFTTokenizer"};

std::string joined_types() {
  std::string s;
  for (const std::string& type : supported_tokenizer_types()) {
    if (!s.empty()) s += ", ";
    s += type;
  }
  return s;
}

void require(bool present, std::string_view flag, std::string_view type) {
  if (!present) {
    throw UsageError(std::string(flag) + " is required for --tokenizer-type " + std::string(type));
  }
}

}  // namespace

std::vector<std::string> supported_tokenizer_types() {
  return {"BertWordPieceLowerCase", "BertWordPieceCase",     "GPT2BPETokenizer",
          "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
          "Llama2Tokenizer",        "TikTokenizer",              "NullTokenizer"};
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options) {
  const std::string& type = options.type;
  if (type == "GPT2BPETokenizer") {
    require(!options.vocab_file.empty(), "--vocab-file", type);
    require(!options.merge_file.empty(), "--merge-file", type);
    return Gpt2BpeTokenizer::load(options.vocab_file, options.merge_file);
  }
  if (type == "BertWordPieceLowerCase" || type == "BertWordPieceCase") {
    require(!options.vocab_file.empty(), "--vocab-file", type);
    return BertWordPieceTokenizer::load(options.vocab_file, type == "BertWordPieceLowerCase",
                                        options.vocab_extra_ids);
  }
  if (type == "HuggingFaceTokenizer") {
    require(!options.tokenizer_model.empty(), "--tokenizer-model", type);
    std::error_code ec;
    if (!std::filesystem::exists(options.tokenizer_model, ec))
      throw UsageError("--tokenizer-model '" + options.tokenizer_model +
                       "' is not a directory or file (mgt reads local tokenizer.json files; it does not "
                       "download from the Hugging Face Hub)");
    return HuggingFaceTokenizer::load(options.tokenizer_model);
  }
  if (type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer") {
    require(!options.tokenizer_model.empty(), "--tokenizer-model", type);
    if (type == "SentencePieceTokenizer")
      return SentencePieceTokenizer::load(options.tokenizer_model, SentencePieceTokenizer::Kind::kSentencePiece,
                                          options.vocab_extra_ids);
    return SentencePieceTokenizer::load(options.tokenizer_model,
                                        type == "Llama2Tokenizer" ? SentencePieceTokenizer::Kind::kLlama2
                                                                  : SentencePieceTokenizer::Kind::kGpt);
  }
  if (type == "TikTokenizer") {
    require(!options.tokenizer_model.empty(), "--tokenizer-model", type);
    require(!options.tiktoken_pattern.empty(), "--tiktoken-pattern", type);
    TikTokenOptions tiktoken;
    tiktoken.path = options.tokenizer_model;
    tiktoken.pattern = options.tiktoken_pattern;
    tiktoken.vocab_size = options.vocab_size;
    tiktoken.num_special_tokens = options.tiktoken_num_special_tokens;
    tiktoken.special_tokens = options.tiktoken_special_tokens;
    return TikTokenizer::load(tiktoken);
  }
  if (type == "NullTokenizer") {
    require(options.vocab_size.has_value(), "--vocab-size", type);
    return std::make_unique<NullTokenizer>(*options.vocab_size);
  }
  if (type.empty()) throw UsageError("--tokenizer-type is required (one of " + joined_types() + ")");
  if (std::find(kUnsupportedMegatronTypes.begin(), kUnsupportedMegatronTypes.end(), type) !=
      kUnsupportedMegatronTypes.end()) {
    throw UsageError("--tokenizer-type " + type + " is not supported by mgt (supported: " +
                     joined_types() + ")");
  }
  throw UsageError("unknown --tokenizer-type '" + type + "' (supported: " + joined_types() + ")");
}

std::int64_t padded_vocab_size(std::int64_t vocab_size, std::int64_t divisible_by,
                               std::int64_t tensor_parallel_size) {
  if (divisible_by < 1) {
    throw UsageError("--make-vocab-size-divisible-by must be positive, got " +
                     std::to_string(divisible_by));
  }
  if (tensor_parallel_size < 1) {
    throw UsageError("--tensor-model-parallel-size must be positive, got " +
                     std::to_string(tensor_parallel_size));
  }
  const std::int64_t multiple = divisible_by * tensor_parallel_size;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace mgt
