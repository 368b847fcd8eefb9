#include "model/lm_loss.hpp"

namespace mgt {

LanguageModelLoss::LanguageModelLoss(GptParameters& params, const TensorParallelMappings& tp)
    : backend_(&params.backend()), tp_(&tp) {
  vocab_ = params.config().padded_vocab_size / params.tensor_parallel().size;
  vocab_start_ = params.tensor_parallel().rank * vocab_;
}

void LanguageModelLoss::forward(ConstFloatView logits, ConstIndexView labels, int64_t tokens,
                                const LossActivations& saved) const {
  if (!tp_->active()) {
    backend_->cross_entropy_forward(logits, labels, tokens, vocab_, saved.losses, saved.row_max,
                                    saved.sum_exp);
    return;
  }
  const FloatView losses = saved.losses.first(tokens);
  const FloatView row_max = saved.row_max.first(tokens);
  const FloatView sum_exp = saved.sum_exp.first(tokens);
  backend_->cross_entropy_row_max(logits, tokens, vocab_, row_max);
  tp_->all_reduce(row_max, dist::ReduceOp::Max);
  backend_->cross_entropy_sum_exp(logits, row_max, tokens, vocab_, sum_exp);
  tp_->all_reduce(sum_exp, dist::ReduceOp::Sum);
  // The losses buffer holds the target logits until the last step overwrites it.
  backend_->cross_entropy_target_logit(logits, labels, tokens, vocab_, vocab_start_, losses);
  tp_->all_reduce(losses, dist::ReduceOp::Sum);
  backend_->cross_entropy_loss(row_max, sum_exp, losses, losses);
}

void LanguageModelLoss::forward_backward(FloatView logits, ConstIndexView labels,
                                         ConstFloatView loss_mask, float scale, int64_t tokens,
                                         const LossActivations& saved) const {
  if (tp_->active()) {
    forward(logits, labels, tokens, saved);
    backward(logits, labels, loss_mask, scale, tokens, saved);
    return;
  }
  backend_->masked_loss_grad(loss_mask, scale, saved.d_loss);
  backend_->cross_entropy_forward_backward(logits, labels, saved.d_loss, tokens, vocab_,
                                           saved.losses);
}

void LanguageModelLoss::backward(FloatView logits, ConstIndexView labels, ConstFloatView loss_mask,
                                 float scale, int64_t tokens, const LossActivations& saved) const {
  backend_->masked_loss_grad(loss_mask, scale, saved.d_loss);
  backend_->cross_entropy_backward(logits, labels, saved.row_max, saved.sum_exp, saved.d_loss,
                                   tokens, vocab_, vocab_start_, logits);
}

}  // namespace mgt
