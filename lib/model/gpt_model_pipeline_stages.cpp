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
  require(slot == kEvaluationSlot || slot >= 0, "pipeline slot " + std::to_string(slot) + " is invalid");
  const bool training = slot != kEvaluationSlot;
  if (training && slot >= static_cast<int64_t>(stage_slots_.size()))
    stage_slots_.resize(static_cast<size_t>(slot + 1));
  StageSlot& s = training ? stage_slots_[static_cast<size_t>(slot)] : stage_eval_slot_;
  if (!s.memory || s.memory->seq() != shape.seq_length || s.memory->batch() != shape.batch_size)
    renew_memory(s.memory, shape, training, 0);
  return s;
}

const GptModel::StageSlot& GptModel::used_slot(int64_t slot) const {
  const StageSlot* s = nullptr;
  if (slot == kEvaluationSlot) s = &stage_eval_slot_;
  else if (slot >= 0 && slot < static_cast<int64_t>(stage_slots_.size()))
    s = &stage_slots_[static_cast<size_t>(slot)];
  require(s != nullptr && s->memory != nullptr,
          "pipeline slot " + std::to_string(slot) + " holds no micro-batch");
  return *s;
}

FloatView GptModel::stage_input(int64_t slot, const MicroBatch& shape) {
  require(!pipeline_stage().is_first(), "the first pipeline stage takes tokens, not an input");
  return stage_slot(slot, shape).memory->hidden(0);
}

LossSum GptModel::stage_forward(int64_t slot, const MicroBatch& batch, const DropoutRng& rng,
                                int64_t num_microbatches, LossReduction reduction, float loss_scale) {
  require(num_microbatches >= 1, "num_microbatches must be >= 1");
  const bool training = slot != kEvaluationSlot;
  prepare_parameters();
  const PipelineStage& stage = pipeline_stage();
  require(!stage.is_last() || !batch.labels.empty(), "the last pipeline stage needs labels");
  StageSlot& s = stage_slot(slot, batch);
  ActivationMemory& memory = *s.memory;
  upload(batch, memory, stage.is_first(), stage.is_last());
  if (training) {
    s.ctx = ForwardContext{batch.seq_length, batch.batch_size, true, rng,
                           sequence_parallel_ ? tp_.size() : 1, sequence_parallel_ ? tp_.rank() : 0, ring_.get()};
  } else {
    s.ctx = ForwardContext{batch.seq_length, batch.batch_size, false, {}};
  }
  forward_pass(s.ctx, memory, stage.is_last());
  if (!stage.is_last()) return {};
  const MaskedLossSum sum = backend_->masked_loss_sum(memory.loss.losses, memory.loss_mask);
  s.loss_scale = loss_gradient_scale(sum, num_microbatches, reduction, loss_scale);
  return {sum.loss_sum, sum.tokens};
}

ConstFloatView GptModel::stage_output(int64_t slot) const {
  require(!pipeline_stage().is_last(), "the last pipeline stage's output is the loss");
  return used_slot(slot).memory->hidden(static_cast<int64_t>(layers_.size()));
}

FloatView GptModel::stage_output_grad(int64_t slot) {
  require(!pipeline_stage().is_last(), "the last pipeline stage starts its backward from the loss");
  require(slot != kEvaluationSlot, "evaluation passes have no backward");
  return used_slot(slot).memory->d_hidden;
}

void GptModel::stage_backward(int64_t slot) {
  require(slot != kEvaluationSlot, "evaluation passes have no backward");
  const StageSlot& s = used_slot(slot);
  backward_pass(s.ctx, *s.memory, s.loss_scale);
}

ConstFloatView GptModel::stage_input_grad(int64_t slot) const {
  require(!pipeline_stage().is_first(), "the first pipeline stage has no input gradient");
  require(slot != kEvaluationSlot, "evaluation passes have no backward");
  return used_slot(slot).memory->d_hidden;
}

void GptModel::all_reduce_embedding_grads() {
  if (embedding_group_ == nullptr) return;
  const FloatView grad = params_.grad(params_.entry("embedding.word_embeddings.weight"));
  embedding_group_->all_reduce(grad, dist::ReduceOp::Sum);
}

}  // namespace mgt
