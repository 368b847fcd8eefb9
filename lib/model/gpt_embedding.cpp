#include "model/gpt_embedding.hpp"

namespace mgt {

GptEmbedding::GptEmbedding(GptParameters& params)
    : backend_(&params.backend()),
      hidden_(params.config().hidden_size),
      hidden_dropout_(params.config().hidden_dropout) {
  const ParameterEntry& word = params.entry("embedding.word_embeddings.weight");
  vocab_start_ = params.tensor_parallel().rank * word.local_shape[0];
  word_ = params.param(word);
  word_grad_ = params.grad(word);
  if (const ParameterEntry* pos = params.find("embedding.position_embeddings.weight")) {
    position_ = params.param(*pos);
    position_grad_ = params.grad(*pos);
  }
}

void GptEmbedding::forward(const ForwardContext& ctx, ConstIndexView tokens,
                           ConstIndexView positions, FloatView scratch, FloatView out) const {
  backend_->embedding_forward(tokens, word_, vocab_start_, hidden_, out);
  if (!position_.empty()) {
    backend_->embedding_forward(positions, position_, 0, hidden_, scratch);
    backend_->add(out, scratch, out);
  }
  const float p = ctx.dropout_p(hidden_dropout_);
  if (p > 0.0f) backend_->dropout_forward(out, p, ctx.key(-1, DropoutSite::kEmbedding), out);
}

void GptEmbedding::backward(const ForwardContext& ctx, ConstIndexView tokens,
                            ConstIndexView positions, FloatView d_out) const {
  const float p = ctx.dropout_p(hidden_dropout_);
  if (p > 0.0f) {
    backend_->dropout_backward(d_out, p, ctx.key(-1, DropoutSite::kEmbedding), d_out);
  }
  backend_->embedding_backward(tokens, d_out, vocab_start_, hidden_, word_grad_);
  if (!position_.empty()) {
    backend_->embedding_backward(positions, d_out, 0, hidden_, position_grad_);
  }
}

}  // namespace mgt
