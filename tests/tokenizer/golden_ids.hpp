// Golden ids made by tools/reference/llama_tokenizers_reference.py with the libraries Megatron
// calls: a header line naming the tokenizer and its properties, then {"text", "ids"[, "decoded"]}.
#pragma once
#include <catch2/catch.hpp>
#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt::test {

struct GoldenCase {
  std::string text;
  std::vector<TokenId> ids;
  std::optional<std::string> decoded;
};

struct GoldenFile {
  TokenizerOptions options;
  std::int64_t vocab_size = 0;
  TokenId eod = 0;
  std::optional<TokenId> pad;
  std::vector<GoldenCase> cases;
};

inline std::optional<TokenId> optional_id(simdjson::dom::element e) {
  std::int64_t v;
  if (e.is_null() || e.get_int64().get(v) || v < 0) return std::nullopt;  // None, or Megatron's -1
  return static_cast<TokenId>(v);
}

inline GoldenFile read_golden(const std::string& name) {
  const std::string path = std::string(MGT_SOURCE_DIR) + "/tests/tokenizer/golden/" + name;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  GoldenFile g;
  simdjson::dom::parser parser;
  bool header = true;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element doc = parser.parse(line);
    if (header) {
      header = false;
      std::string_view s;
      REQUIRE(doc["tokenizer_type"].get(s) == simdjson::SUCCESS);
      g.options.type = std::string(s);
      REQUIRE(doc["tokenizer_model"].get(s) == simdjson::SUCCESS);
      g.options.tokenizer_model = std::string(MGT_SOURCE_DIR) + "/" + std::string(s);
      g.vocab_size = doc["vocab_size"].get_int64().value();
      g.eod = static_cast<TokenId>(doc["eod"].get_int64().value());
      g.pad = optional_id(doc["pad"].value());
      const simdjson::dom::object flags = doc["flags"].get_object().value();
      for (auto [key, value] : flags) {
        if (key == "vocab_extra_ids") g.options.vocab_extra_ids = static_cast<int>(value.get_int64().value());
        else if (key == "vocab_size") g.options.vocab_size = value.get_int64().value();
        else if (key == "tiktoken_pattern") g.options.tiktoken_pattern = std::string(value.get_string().value());
        else if (key == "tiktoken_num_special_tokens")
          g.options.tiktoken_num_special_tokens = static_cast<int>(value.get_int64().value());
        else if (key == "tiktoken_special_tokens") {
          std::vector<std::string> tokens;
          const simdjson::dom::array list = value.get_array().value();
          for (simdjson::dom::element t : list) tokens.emplace_back(t.get_string().value());
          g.options.tiktoken_special_tokens = tokens;
        } else FAIL("unknown flag in golden header: " << key);
      }
      continue;
    }
    GoldenCase c;
    c.text = std::string(doc["text"].get_string().value());
    const simdjson::dom::array ids = doc["ids"].get_array().value();
    for (simdjson::dom::element id : ids)
      c.ids.push_back(static_cast<TokenId>(id.get_int64().value()));
    std::string_view decoded;
    if (doc["decoded"].get(decoded) == simdjson::SUCCESS) c.decoded = std::string(decoded);
    g.cases.push_back(std::move(c));
  }
  return g;
}

// Every golden text gives exactly the golden ids (and decodes to the golden text), through the
// factory as a program builds the tokenizer, and through a clone. `ties` are texts whose best
// segmentations tie in exact arithmetic, which the reference library and mgt may break
// differently: for those the ids must be a permutation of the golden ones decoding alike.
inline void check_golden(const std::string& name, const std::vector<std::string>& ties = {}) {
  const GoldenFile g = read_golden(name);
  INFO(name);
  std::unique_ptr<Tokenizer> tok = make_tokenizer(g.options);
  CHECK(tok->vocab_size() == g.vocab_size);
  CHECK(tok->eod() == g.eod);
  CHECK(tok->pad() == g.pad);
  std::unique_ptr<Tokenizer> copy = tok->clone();
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < g.cases.size(); ++i) {
    const GoldenCase& c = g.cases[i];
    INFO("golden text " << i << ": " << c.text.substr(0, 80));
    if (std::find(ties.begin(), ties.end(), c.text) != ties.end()) {
      std::vector<TokenId> ours = tok->tokenize(c.text);
      CHECK(tok->detokenize(ours) == tok->detokenize(c.ids));
      std::vector<TokenId> theirs = c.ids;
      std::sort(ours.begin(), ours.end());
      std::sort(theirs.begin(), theirs.end());
      CHECK(ours == theirs);
      continue;
    }
    CHECK(tok->tokenize(c.text) == c.ids);
    if (c.decoded) CHECK(tok->detokenize(c.ids) == *c.decoded);
    tokens += c.ids.size();
  }
  for (const GoldenCase& c : g.cases)
    if (std::find(ties.begin(), ties.end(), c.text) == ties.end()) CHECK(copy->tokenize(c.text) == c.ids);
  CHECK(g.cases.size() >= 100);
  CHECK(tokens >= 3000);
}

}  // namespace mgt::test
