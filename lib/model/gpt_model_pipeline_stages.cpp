// GptModel's pipeline-stage calls (gpt_model.hpp): the slots of the micro-batches in flight on this
// stage, their forward and backward, the activations and gradients exchanged with the
// neighbouring stages, and the tied word embedding's gradient summed over the first and last
// stages.
#include <cstdint>
#include <string>

#include "model/gpt_model.hpp"
#include "model/gpt_model_internal.hpp"

namespace mgt {

using gpt_model_internal::loss_gradient_scale;
using gpt_model_internal::require;

GptModel::StageSlot& GptModel::stage_slot(int64_t slot, const MicroBatch& shape) {
  const bool training = slot >= 0;
  // Evaluation slots are kEvaluationSlot, kEvaluationSlot − 1, … (the interleaved schedule keeps
  // several evaluation micro-batches in flight).
  std::vector<StageSlot>& slots = training ? stage_slots_ : stage_eval_slots_;
  const auto index = static_cast<size_t>(training ? slot : kEvaluationSlot - slot);
  if (index >= slots.size()) slots.resize(index + 1);
  StageSlot& s = slots[index];
  if (!s.memory || s.memory->seq() != shape.seq_length || s.memory->batch() != shape.batch_size) {
    // The micro-batches in flight share full recomputation's scratch: one backward runs at a time.
    std::shared_ptr<RecomputeScratch> scratch;
    if (training) {
      for (const StageSlot& other : stage_slots_) {
        if (&other != &s && other.memory && other.memory->recompute_scratch()) scratch = other.memory->recompute_scratch();
      }
    }
    renew_memory(s.memory, shape, training, 0, std::move(scratch));
  }
  return s;
}

const GptModel::StageSlot& GptModel::used_slot(int64_t slot) const {
  const StageSlot* s = nullptr;
  const std::vector<StageSlot>& slots = slot >= 0 ? stage_slots_ : stage_eval_slots_;
  const auto index = static_cast<size_t>(slot >= 0 ? slot : kEvaluationSlot - slot);
  if (index < slots.size()) s = &slots[index];
  require(s != nullptr && s->memory != nullptr,
          "pipeline slot " + std::to_string(slot) + " holds no micro-batch");
  return *s;
}

FloatView GptModel::stage_input(int64_t slot, const MicroBatch& shape, int64_t chunk) {
  require(!chunk_span(chunk).embedding, "the first pipeline stage takes tokens, not an input");
  StageSlot& s = stage_slot(slot, shape);
  s.chunk = chunk;
  return s.memory->hidden(0);
}

LossSum GptModel::stage_forward(int64_t slot, const MicroBatch& batch, const DropoutRng& rng,
                                int64_t num_microbatches, LossReduction reduction, float loss_scale,
                                int64_t chunk) {
  require(num_microbatches >= 1, "num_microbatches must be >= 1");
  const bool training = slot >= 0;
  prepare_parameters();
  const LayerSpan span = chunk_span(chunk);
  require(!span.head || !batch.labels.empty(), "the last pipeline stage needs labels");
  StageSlot& s = stage_slot(slot, batch);
  s.chunk = chunk;
  ActivationMemory& memory = *s.memory;
  upload(batch, memory, span.embedding, span.head);
  if (training) {
    s.ctx = ForwardContext{batch.seq_length, batch.batch_size, true, rng,
                           sequence_parallel_ ? tp_.size() : 1, sequence_parallel_ ? tp_.rank() : 0, context_parallel_.get()};
    // The MoE layers' auxiliary losses as in run_forward_backward: each stage records its own
    // layers' and scales their gradients itself.
    s.ctx.moe_statistics = moe_statistics_.view();
    s.ctx.moe_loss_grad_scale = reduction == LossReduction::kSum
                                    ? loss_scale * static_cast<float>(s.ctx.tokens())
                                    : loss_scale / static_cast<float>(num_microbatches);
  } else {
    s.ctx = ForwardContext{batch.seq_length, batch.batch_size, false, {}};
  }
  if (fp8_ && training) fp8_->begin_forward(slot, true);
  forward_pass(s.ctx, memory, span.head, span);
  if (fp8_ && training) fp8_->finish_forward();
  if (!span.head) return {};
  const MaskedLossSum sum = backend_->masked_loss_sum(memory.loss.losses, memory.loss_mask);
  s.loss_scale = loss_gradient_scale(sum, num_microbatches, reduction, loss_scale);
  return {sum.loss_sum, sum.tokens};
}

ConstFloatView GptModel::stage_output(int64_t slot) const {
  const StageSlot& s = used_slot(slot);
  require(!chunk_span(s.chunk).head, "the last pipeline stage's output is the loss");
  return s.memory->hidden(stage_config_.num_layers);
}

FloatView GptModel::stage_output_grad(int64_t slot) {
  require(slot >= 0, "evaluation passes have no backward");
  require(!params_.for_inference(), "a model built for inference has no backward");
  const StageSlot& s = used_slot(slot);
  require(!chunk_span(s.chunk).head, "the last pipeline stage starts its backward from the loss");
  return s.memory->d_hidden;
}

void GptModel::stage_backward(int64_t slot) {
  require(slot >= 0, "evaluation passes have no backward");
  const StageSlot& s = used_slot(slot);
  if (fp8_) fp8_->begin_backward(slot);
  backward_pass(s.ctx, *s.memory, s.loss_scale, HeadGradient::kNone, chunk_span(s.chunk));
  if (fp8_) fp8_->finish_backward();
}

ConstFloatView GptModel::stage_input_grad(int64_t slot) const {
  require(slot >= 0, "evaluation passes have no backward");
  const StageSlot& s = used_slot(slot);
  require(!chunk_span(s.chunk).embedding, "the first pipeline stage has no input gradient");
  return s.memory->d_hidden;
}

void GptModel::all_reduce_embedding_grads() {
  if (embedding_group_ == nullptr) return;
  const FloatView grad = params_.grad(params_.entry("embedding.word_embeddings.weight"));
  embedding_group_->all_reduce(grad, dist::ReduceOp::Sum);
}

}  // namespace mgt
