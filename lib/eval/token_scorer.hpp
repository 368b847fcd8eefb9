// What the zero-shot tasks need from a language model, and no more: for every position of a
// batch of rows, the cross-entropy of its label and, on request, the token the model ranks
// first. The task code (windows, cloze targets, counting) is written against this interface so
// that tests can check it with a scorer whose answers are known by hand; GptModelScorer
// (eval/model_scorer.hpp) is the real one.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace mgt {

struct ScoringBatch {
  std::int64_t batch_size = 0;  // b
  std::int64_t seq_length = 0;  // s
  std::span<const std::int64_t> tokens;  // [b, s] model input
  std::span<const std::int64_t> labels;  // [b, s] the token expected after each position
  bool want_argmax = false;
  // [b, s] non-zero where a loss (and argmax) is wanted; empty: everywhere. A scorer may leave
  // the other positions' values unspecified, and skip computing them.
  std::span<const float> scored = {};
};

struct TokenScores {
  std::vector<float> losses;         // [b, s] cross-entropy of the label (natural log)
  std::vector<std::int64_t> argmax;  // [b, s] id of the largest logit (the first on ties); empty
                                     // unless want_argmax
};

class TokenScorer {
public:
  virtual ~TokenScorer() = default;
  virtual TokenScores score(const ScoringBatch& batch) = 0;
};

}  // namespace mgt
