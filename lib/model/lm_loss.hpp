// The language-model loss on the output logits: per-token softmax cross-entropy over the
// (padded) vocabulary, then Megatron's masked mean. Written as the steps of the vocab-parallel
// cross entropy so that tensor parallelism only adds all-reduces between them.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

struct LossActivations {
  FloatView losses;   // [s·b] per-token cross-entropy, unmasked
  FloatView row_max;  // [s·b]
  FloatView sum_exp;  // [s·b]
  FloatView d_loss;   // [s·b]
};

class LanguageModelLoss {
public:
  explicit LanguageModelLoss(GptParameters& params);

  int64_t local_vocab() const { return vocab_; }

  void forward(ConstFloatView logits, ConstIndexView labels, int64_t tokens,
               const LossActivations& saved) const;
  // Overwrites logits with ∂loss/∂logits, where the loss is Σ mask·CE · scale.
  void backward(FloatView logits, ConstIndexView labels, ConstFloatView loss_mask, float scale,
                int64_t tokens, const LossActivations& saved) const;

private:
  Backend* backend_;
  int64_t vocab_;
  int64_t vocab_start_;
};

}  // namespace mgt
