#include "model/lm_loss.hpp"

namespace mgt {

LanguageModelLoss::LanguageModelLoss(GptParameters& params) : backend_(&params.backend()) {
  const int64_t tp = params.tensor_parallel().size;
  vocab_ = params.config().padded_vocab_size / tp;
  vocab_start_ = params.tensor_parallel().rank * vocab_;
}

void LanguageModelLoss::forward(ConstFloatView logits, ConstIndexView labels, int64_t tokens,
                                const LossActivations& saved) const {
  backend_->cross_entropy_forward(logits, labels, tokens, vocab_, saved.losses, saved.row_max,
                                  saved.sum_exp);
}

void LanguageModelLoss::backward(FloatView logits, ConstIndexView labels, ConstFloatView loss_mask,
                                 float scale, int64_t tokens, const LossActivations& saved) const {
  backend_->masked_loss_grad(loss_mask, scale, saved.d_loss);
  backend_->cross_entropy_backward(logits, labels, saved.row_max, saved.sum_exp, saved.d_loss,
                                   tokens, vocab_, vocab_start_, logits);
}

}  // namespace mgt
