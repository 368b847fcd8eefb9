// Megatron's LanguageModelEmbedding: word embedding (vocab-parallel rows), plus the learned
// absolute position embedding when configured, then embedding dropout (--hidden-dropout).
// Token ids arrive sequence-major, [s, b], so the output is already [s, b, h].
//
// VocabParallelEmbedding: each tensor-parallel rank holds rows [vocab_start, vocab_start +
// padded/tp) of the word embedding; ids outside them give zero rows, and the partial embeddings
// are summed over the group (reduce_from_tensor_region). Under sequence parallelism the output is
// this rank's [s/tp, b, h] slice: with learned positions the whole sum is scattered after the
// position embedding is added (as language_model_embedding.py does), without them the partial
// embeddings are reduce-scattered directly (its reduce_scatter_embeddings).
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

class GptEmbedding {
public:
  // `tp` must outlive the embedding.
  GptEmbedding(GptParameters& params, const TensorParallelMappings& tp);

  // out[s, b, h] (this rank's [s/tp, b, h] in a sequence-parallel pass); scratch [s, b, h] holds
  // the position rows without sequence parallelism, `sequence` the whole-sequence tensors with
  // it. positions may be empty when the model has no learned position embedding.
  void forward(const ForwardContext& ctx, ConstIndexView tokens, ConstIndexView positions,
               FloatView scratch, const SequenceParallelScratch& sequence, FloatView out) const;
  // Accumulates the embedding gradients (a scatter, which cannot write over them: where the
  // iteration's first write is this one, the gradient is zeroed first, as the tied output layer's
  // deferred zeroing asks: GptParameters::grad_write_accumulates); d_out is consumed (overwritten).
  void backward(const ForwardContext& ctx, ConstIndexView tokens, ConstIndexView positions,
                const SequenceParallelScratch& sequence, FloatView d_out) const;

private:
  // The scatter-add of d_whole's rows into the table at `entry` (its gradient `grad`).
  void scatter_gradient(ConstIndexView ids, ConstFloatView d_whole, int64_t vocab_start, const ParameterEntry& entry,
                        FloatView grad) const;

  Backend* backend_;
  GptParameters* params_;
  const ParameterEntry* word_entry_;
  const ParameterEntry* position_entry_ = nullptr;  // null without learned positions
  const TensorParallelMappings* tp_;
  int64_t hidden_;
  int64_t vocab_start_;  // first vocabulary row held by this tensor-parallel rank
  double hidden_dropout_;
  ConstFloatView word_;  // the compute copy (GptParameters::compute_param)
  FloatView word_grad_;
  ConstFloatView position_;  // the compute copy (GptParameters::compute_param)
  FloatView position_grad_;  // empty without learned positions
};

}  // namespace mgt
