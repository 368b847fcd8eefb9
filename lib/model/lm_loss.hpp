// The language-model loss on the output logits: per-token softmax cross-entropy over the
// (padded) vocabulary, then Megatron's masked mean. Under tensor parallelism the logits are split
// over the vocabulary and the loss is Megatron's _VocabParallelCrossEntropy
// (megatron/core/tensor_parallel/cross_entropy.py) in one pass over this rank's slice: its row
// maxima, sums of exponentials and target logits (zero on ranks not holding the target) are
// all-gathered and combined in rank order, so every rank gets the same losses. Megatron
// all-reduces the maxima, then the sums and the target logits, over three passes; the losses are
// the same up to rounding (kernels/cpu/cross_entropy.hpp). The backward needs no communication:
// softmax − one-hot over this rank's slice.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

struct LossActivations {
  FloatView losses;   // [s·b] per-token cross-entropy, unmasked
  FloatView row_max;  // [s·b]
  FloatView sum_exp;  // [s·b]
  FloatView d_loss;   // [s·b]
  // [tp, 3, s·b] under tensor parallelism: every rank's statistics of its vocabulary slice.
  FloatView shard_statistics;

  // Rows [start, start + count) of each, for a head computed a few rows at a time (the
  // statistics then laid out [tp, 3, count] at the front).
  LossActivations rows(int64_t start, int64_t count) const;
};

class LanguageModelLoss {
public:
  // `tp` must outlive the loss.
  LanguageModelLoss(GptParameters& params, const TensorParallelMappings& tp);

  int64_t local_vocab() const { return vocab_; }

  // logits [tokens, local vocab]; every rank gets the whole losses.
  void forward(ConstFloatView logits, ConstIndexView labels, int64_t tokens,
               const LossActivations& saved) const;
  // forward, then backward with the same arguments: the losses, and the logits overwritten by
  // their gradient. Without tensor parallelism one pass over the logits (the loss gradient's
  // scale must then be known before the losses are: from the host's loss mask).
  void forward_backward(FloatView logits, ConstIndexView labels, ConstFloatView loss_mask,
                        float scale, int64_t tokens, const LossActivations& saved) const;
  // Overwrites logits with ∂loss/∂logits, where the loss is Σ mask·CE · scale.
  void backward(FloatView logits, ConstIndexView labels, ConstFloatView loss_mask, float scale,
                int64_t tokens, const LossActivations& saved) const;

private:
  Backend* backend_;
  const TensorParallelMappings* tp_;
  int64_t vocab_;
  int64_t vocab_start_;
};

}  // namespace mgt
