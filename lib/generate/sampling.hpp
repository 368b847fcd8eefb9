// Choosing the next token from a row of logits, as Megatron's text generation samples
// (megatron/inference/text_generation/sampling.py): top_k == 1 is greedy (argmax); otherwise
// the logits are divided by the temperature, then filtered by top-k (everything below the k-th
// largest value is dropped; ties with it stay) or by top-p (the smallest set of most probable
// tokens whose probability reaches p; the token that crosses p is kept, so the most probable
// token always is), and a token is drawn from the softmax of what remains.
//
// Unlike Megatron, which samples over the padded vocabulary and clamps a padding id to the last
// real one, callers pass only the true vocabulary's logits, so padding is never drawn.
#pragma once
#include <cstdint>
#include <span>

#include "generate/sample_rng.hpp"

namespace mgt {

struct SamplingParams {
  double temperature = 1.0;  // (0, 100]
  int64_t top_k = 1;         // 1: greedy; 0: no top-k filter
  double top_p = 0.0;        // [0, 1]; 0: no top-p filter; needs top_k 0
  // After each generated token top_p becomes max(top_p · decay, bound) (Megatron's
  // top_p_decay / top_p_bound); decay 0 keeps it fixed.
  double top_p_decay = 0.0;
  double top_p_bound = 0.0;

  bool greedy() const { return top_k == 1; }
};

// Throws mgt::UsageError naming the flag, with Megatron's ranges: temperature in (0, 100],
// top_k in [0, vocab], top_p in [0, 1], top_k > 1 not with top_p > 0, decay and bound in [0, 1]
// and only with top_p.
void validate_sampling(const SamplingParams& params, int64_t vocab_size);

// Index of the largest value; the first one on ties (torch.argmax).
int64_t argmax(std::span<const float> logits);

// In place: values below the k-th largest become −inf (k >= 1, k <= size).
void keep_top_k(std::span<float> logits, int64_t k);
// In place: tokens outside the top-p nucleus become −inf (0 < p <= 1).
void keep_top_p(std::span<float> logits, double p);

// The next token; `logits` (true vocabulary) is used as scratch and changed.
int64_t sample_token(std::span<float> logits, const SamplingParams& params, SampleRng& rng);

}  // namespace mgt
