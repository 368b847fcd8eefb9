// TokenScorer over the GPT model: one forward pass per batch, no dropout, positions 0…s−1,
// causal attention only (Megatron's zero-shot code builds no document-reset masks); the output
// layer runs for the scored positions only.
#pragma once
#include "eval/token_scorer.hpp"
#include "model/gpt_model.hpp"

namespace mgt {

class GptModelScorer final : public TokenScorer {
public:
  explicit GptModelScorer(GptModel& model) : model_(model) {}
  TokenScores score(const ScoringBatch& batch) override;

private:
  GptModel& model_;
};

}  // namespace mgt
