// Shared pieces of the zero-shot evaluation tests: a tokenizer whose ids are the bytes of the
// text, and a scorer whose answers follow a rule simple enough to compute results by hand.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eval/token_scorer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt::eval_testing {

// One token per byte, id = the byte's value; eod = 256.
class ByteTokenizer final : public Tokenizer {
public:
  void tokenize(std::string_view text, std::vector<TokenId>& out) override {
    for (const char c : text) out.push_back(static_cast<unsigned char>(c));
  }
  std::string detokenize(std::span<const TokenId> ids) const override {
    std::string s;
    for (const TokenId id : ids) s += static_cast<char>(id);
    return s;
  }
  std::unique_ptr<Tokenizer> clone() const override { return std::make_unique<ByteTokenizer>(); }
  std::int64_t vocab_size() const override { return 257; }
  TokenId eod() const override { return 256; }
  std::string class_name() const override { return "_ByteTokenizer"; }
  std::vector<std::string> tokenizer_paths() const override { return {}; }
};

inline std::vector<TokenId> bytes(std::string_view text) {
  std::vector<TokenId> ids;
  ByteTokenizer().tokenize(text, ids);
  return ids;
}

// A "model" that predicts, after token t, next(t): t + 1 unless `successor` says otherwise. The
// loss is kHit when the label is that prediction and kMiss otherwise. Records every batch.
class RuleScorer final : public TokenScorer {
public:
  static constexpr float kHit = 0.25f;
  static constexpr float kMiss = 1.5f;

  std::map<std::int64_t, std::int64_t> successor;
  struct Call {
    std::int64_t batch_size, seq_length;
    std::vector<std::int64_t> tokens, labels;
  };
  std::vector<Call> calls;

  std::int64_t next(std::int64_t t) const {
    const auto it = successor.find(t);
    return it == successor.end() ? t + 1 : it->second;
  }

  TokenScores score(const ScoringBatch& batch) override {
    calls.push_back({batch.batch_size, batch.seq_length, {batch.tokens.begin(), batch.tokens.end()},
                     {batch.labels.begin(), batch.labels.end()}});
    TokenScores s;
    for (std::size_t p = 0; p < batch.tokens.size(); ++p) {
      const std::int64_t predicted = next(batch.tokens[p]);
      s.losses.push_back(batch.labels[p] == predicted ? kHit : kMiss);
      if (batch.want_argmax) s.argmax.push_back(predicted);
    }
    return s;
  }
};

}  // namespace mgt::eval_testing
