#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_paths.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace mgt;

namespace {

int usage_exit_code(const TokenizerOptions& options) {
  try {
    make_tokenizer(options);
  } catch (const Error& e) {
    return e.exit_code();
  }
  return 0;
}

}  // namespace

TEST_CASE("padded_vocab_size rounds up to divisible_by x tensor parallel size", "[factory]") {
  CHECK(padded_vocab_size(50257, 128, 1) == 50304);
  CHECK(padded_vocab_size(50257, 128, 2) == 50432);
  CHECK(padded_vocab_size(50257, 128, 8) == 51200);
  CHECK(padded_vocab_size(30524, 128, 1) == 30592);
  CHECK(padded_vocab_size(50304, 128, 1) == 50304);
  CHECK(padded_vocab_size(50001, 1, 1) == 50001);
  CHECK_THROWS_AS(padded_vocab_size(100, 0, 1), Error);
  CHECK_THROWS_AS(padded_vocab_size(100, 128, 0), Error);
}

TEST_CASE("factory builds the BERT and null tokenizers", "[factory]") {
  TokenizerOptions options;
  options.type = "BertWordPieceLowerCase";
  options.vocab_file = test::dataset_path("bert-uncased-vocab.txt");
  auto lower = make_tokenizer(options);
  CHECK(lower->class_name() == "_BertWordPieceTokenizer");
  CHECK(lower->tokenize("Hello") == std::vector<TokenId>{7592});
  CHECK(lower->tokenizer_options().front().second == "True");

  options.type = "BertWordPieceCase";
  options.vocab_file = test::dataset_path("bert-cased-vocab.txt");
  options.vocab_extra_ids = 2;
  auto cased = make_tokenizer(options);
  CHECK(cased->tokenize("Hello") == std::vector<TokenId>{8667});
  CHECK(cased->vocab_size() == 29000);
  CHECK(cased->tokenizer_options().front().second == "False");

  TokenizerOptions null;
  null.type = "NullTokenizer";
  null.vocab_size = 1000;
  auto n = make_tokenizer(null);
  CHECK(n->eod() == 1000);
  CHECK(n->vocab_size() == 1001);
}

TEST_CASE("factory builds GPT2BPETokenizer from its two files", "[factory]") {
  TokenizerOptions options;
  options.type = "GPT2BPETokenizer";
  options.vocab_file = test::dataset_path("gpt2-vocab.json");
  options.merge_file = test::dataset_path("gpt2-merges.txt");
  auto t = make_tokenizer(options);
  CHECK(t->class_name() == "_GPT2BPETokenizer");
  CHECK(t->vocab_size() == 50257);
  CHECK(t->eod() == 50256);
}

TEST_CASE("factory refuses missing flags and unknown types", "[factory]") {
  TokenizerOptions options;
  options.type = "GPT2BPETokenizer";
  CHECK_THROWS_WITH(make_tokenizer(options),
                    "--vocab-file is required for --tokenizer-type GPT2BPETokenizer");
  options.vocab_file = test::dataset_path("gpt2-vocab.json");
  CHECK_THROWS_WITH(make_tokenizer(options),
                    "--merge-file is required for --tokenizer-type GPT2BPETokenizer");
  CHECK(usage_exit_code(options) == kExitUsage);

  for (const char* type : {"BertWordPieceLowerCase", "BertWordPieceCase"}) {
    TokenizerOptions bert;
    bert.type = type;
    CHECK_THROWS_WITH(make_tokenizer(bert),
                      std::string("--vocab-file is required for --tokenizer-type ") + type);
  }
  TokenizerOptions null;
  null.type = "NullTokenizer";
  CHECK_THROWS_WITH(make_tokenizer(null), "--vocab-size is required for --tokenizer-type NullTokenizer");

  TokenizerOptions unknown;
  unknown.type = "WordPiece";
  CHECK_THROWS_WITH(make_tokenizer(unknown),
                    Catch::StartsWith("unknown --tokenizer-type 'WordPiece'") &&
                        Catch::Contains("GPT2BPETokenizer") && Catch::Contains("NullTokenizer"));
  CHECK(usage_exit_code(unknown) == kExitUsage);
  unknown.type = "";
  CHECK(usage_exit_code(unknown) == kExitUsage);

  for (const char* type : {"SentencePieceTokenizer", "GPTSentencePieceTokenizer",
                           "HuggingFaceTokenizer", "Llama2Tokenizer", "TikTokenizer"}) {
    TokenizerOptions model;
    model.type = type;
    CHECK_THROWS_WITH(make_tokenizer(model),
                      std::string("--tokenizer-model is required for --tokenizer-type ") + type);
    CHECK(usage_exit_code(model) == kExitUsage);
  }
  TokenizerOptions tiktoken;
  tiktoken.type = "TikTokenizer";
  tiktoken.tokenizer_model = test::dataset_path("tokenizer-tests/tiktoken-bpe.json");
  CHECK_THROWS_WITH(make_tokenizer(tiktoken), "--tiktoken-pattern is required for --tokenizer-type TikTokenizer");
  tiktoken.tiktoken_pattern = "v3";
  CHECK_THROWS_WITH(make_tokenizer(tiktoken), Catch::Contains("--tiktoken-pattern must be v1 or v2"));
  TokenizerOptions hub;
  hub.type = "HuggingFaceTokenizer";
  hub.tokenizer_model = "meta-llama/Meta-Llama-3-8B";
  CHECK_THROWS_WITH(make_tokenizer(hub), Catch::Contains("does not download"));
  CHECK(usage_exit_code(hub) == kExitUsage);

  for (const char* type : {"MultimodalTokenizer", "NullMultimodalTokenizer", "SFTTokenizer"}) {
    TokenizerOptions megatron_only;
    megatron_only.type = type;
    megatron_only.vocab_file = "x";
    megatron_only.vocab_size = 10;
    CHECK_THROWS_WITH(make_tokenizer(megatron_only), Catch::Contains("not supported by mgt"));
    CHECK(usage_exit_code(megatron_only) == kExitUsage);
  }
}

TEST_CASE("factory reports a missing vocab file as a runtime error", "[factory]") {
  TokenizerOptions options;
  options.type = "BertWordPieceCase";
  options.vocab_file = test::scratch_dir("factory-missing") + "/vocab.txt";
  CHECK_THROWS_WITH(make_tokenizer(options), Catch::Contains("vocab.txt"));
  CHECK(usage_exit_code(options) == kExitFailure);
}

TEST_CASE("supported_tokenizer_types lists what make_tokenizer accepts", "[factory]") {
  CHECK(supported_tokenizer_types() ==
        std::vector<std::string>{"BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
                                 "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
                                 "Llama2Tokenizer", "TikTokenizer", "NullTokenizer"});
}
