#include "model/gpt_embedding.hpp"

namespace mgt {

GptEmbedding::GptEmbedding(GptParameters& params, const TensorParallelMappings& tp)
    : backend_(&params.backend()),
      params_(&params),
      tp_(&tp),
      hidden_(params.config().hidden_size),
      hidden_dropout_(params.config().hidden_dropout) {
  const ParameterEntry& word = params.entry("embedding.word_embeddings.weight");
  vocab_start_ = params.tensor_parallel().rank * word.local_shape[0];
  word_ = params.compute_param(word);
  word_grad_ = params.grad(word);
  word_entry_ = &word;
  if (const ParameterEntry* pos = params.find("embedding.position_embeddings.weight")) {
    position_ = params.compute_param(*pos);
    position_grad_ = params.grad(*pos);
    position_entry_ = pos;
  }
}

void GptEmbedding::scatter_gradient(ConstIndexView ids, ConstFloatView d_whole, int64_t vocab_start,
                                    const ParameterEntry& entry, FloatView grad) const {
  if (!params_->grad_write_accumulates(entry)) backend_->fill(grad, 0.0f);
  backend_->embedding_backward(ids, d_whole, vocab_start, hidden_, grad);
}

void GptEmbedding::forward(const ForwardContext& ctx, ConstIndexView tokens,
                           ConstIndexView positions, FloatView scratch,
                           const SequenceParallelScratch& sequence, FloatView out) const {
  if (!ctx.sequence_parallel()) {
    backend_->embedding_forward(tokens, word_, vocab_start_, hidden_, out);
    tp_->reduce_from_tensor_region_forward(out);
    if (!position_.empty()) {
      backend_->embedding_forward(positions, position_, 0, hidden_, scratch);
      backend_->add(out, scratch, out);
    }
  } else {
    const int64_t n = ctx.tokens() * hidden_;
    const FloatView whole = sequence.gathered.first(n);
    backend_->embedding_forward(tokens, word_, vocab_start_, hidden_, whole);
    if (!position_.empty()) {
      tp_->reduce_from_tensor_region_forward(whole);
      const FloatView rows = sequence.whole.first(n);
      backend_->embedding_forward(positions, position_, 0, hidden_, rows);
      backend_->add(whole, rows, whole);
      tp_->scatter_to_sequence_parallel_region_forward(whole, out);
    } else {
      tp_->reduce_scatter_to_sequence_parallel_region_forward(whole, out);
    }
  }
  const float p = ctx.dropout_p(hidden_dropout_);
  if (p > 0.0f) {
    backend_->dropout_forward(out, p, ctx.hidden_key(-1, DropoutSite::kEmbedding, hidden_), out);
  }
}

void GptEmbedding::backward(const ForwardContext& ctx, ConstIndexView tokens,
                            ConstIndexView positions, const SequenceParallelScratch& sequence,
                            FloatView d_out) const {
  const float p = ctx.dropout_p(hidden_dropout_);
  if (p > 0.0f) {
    backend_->dropout_backward(d_out, p, ctx.hidden_key(-1, DropoutSite::kEmbedding, hidden_),
                               d_out);
  }
  ConstFloatView d_whole = tp_->reduce_from_tensor_region_backward(d_out);
  if (ctx.sequence_parallel()) {
    // The backward of the scatter (learned positions) or of the reduce-scatter (without them)
    // is the same all-gather.
    const FloatView gathered = sequence.gathered.first(ctx.tokens() * hidden_);
    if (!position_.empty()) {
      tp_->scatter_to_sequence_parallel_region_backward(d_out, gathered);
    } else {
      tp_->reduce_scatter_to_sequence_parallel_region_backward(d_out, gathered);
    }
    d_whole = gathered;
  }
  scatter_gradient(tokens, d_whole, vocab_start_, *word_entry_, word_grad_);
  if (position_entry_ != nullptr) scatter_gradient(positions, d_whole, 0, *position_entry_, position_grad_);
}

}  // namespace mgt
