#include "model/lm_loss.hpp"

namespace mgt {

LossActivations LossActivations::rows(int64_t start, int64_t count) const {
  const auto part = [&](FloatView v) { return v.empty() ? v : v.subspan(start, count); };
  const int64_t ranks = losses.empty() ? 0 : shard_statistics.size() / (3 * losses.size());
  return {part(losses), part(row_max), part(sum_exp), part(d_loss),
          shard_statistics.first(ranks * 3 * count)};
}

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
  // This rank's statistics go straight into its place in the gathered buffer.
  const int64_t ranks = tp_->size();
  const FloatView gathered = saved.shard_statistics.first(ranks * 3 * tokens);
  const FloatView own = gathered.subspan(tp_->rank() * 3 * tokens, 3 * tokens);
  backend_->cross_entropy_shard_statistics(logits, labels, tokens, vocab_, vocab_start_, own);
  tp_->all_gather(own, gathered);
  backend_->cross_entropy_combine(gathered, ranks, tokens, saved.losses.first(tokens),
                                  saved.row_max.first(tokens), saved.sum_exp.first(tokens));
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
