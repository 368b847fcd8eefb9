// Megatron's LanguageModelEmbedding: word embedding (vocab-parallel rows), plus the learned
// absolute position embedding when configured, then embedding dropout (--hidden-dropout).
// Token ids arrive sequence-major, [s, b], so the output is already [s, b, h].
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

class GptEmbedding {
public:
  explicit GptEmbedding(GptParameters& params);

  // out[s, b, h]; scratch [s, b, h] holds the position rows. positions may be empty when the
  // model has no learned position embedding.
  void forward(const ForwardContext& ctx, ConstIndexView tokens, ConstIndexView positions,
               FloatView scratch, FloatView out) const;
  // Accumulates the embedding gradients; d_out is consumed (overwritten).
  void backward(const ForwardContext& ctx, ConstIndexView tokens, ConstIndexView positions,
                FloatView d_out) const;

private:
  Backend* backend_;
  int64_t hidden_;
  int64_t vocab_start_;  // first vocabulary row held by this tensor-parallel rank
  double hidden_dropout_;
  FloatView word_, word_grad_;
  FloatView position_, position_grad_;  // empty without learned positions
};

}  // namespace mgt
