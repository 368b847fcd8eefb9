// Every buffer one micro-batch shape needs, allocated once and reused while the shape stays.
// Which activations exist per layer is the memory policy:
//   none (training):  every layer keeps all it saves for its backward;
//   selective:        as none, but what --recompute-modules names is one set shared by all
//                     layers (rebuilt in each layer's backward): core_attn, the core attention
//                     output and its softmax statistics; layernorm, the input and pre-MLP norm
//                     outputs; mlp, the dense MLP's fc1 and activation outputs; moe_act, the
//                     MoE experts' activation output;
//   full:             the layers that RecomputePlan checkpoints keep nothing but their group's
//                     input; the activation sets (and inner inputs) of one group are shared by
//                     all checkpointed groups (block: borrowed from the stage's last layer) and
//                     refilled by recomputing the group's forward just before its backward; the
//                     other layers keep everything. The micro-batches in flight on a pipeline
//                     stage share that scratch (RecomputeScratch);
//   evaluation:       one shared activation set and two alternating hidden buffers;
//   generation:       as evaluation, with logits for the last position of each sequence only.
// Under sequence parallelism (training only) the buffers outside the tensor-parallel regions
// (layer inputs, residuals, their gradients) hold this rank's s/tp tokens; the norm outputs that
// enter linear_qkv and linear_fc1 hold the whole sequence, all-gathered there and kept for the
// backward; shared whole-sequence buffers take the other gathered and to-be-scattered tensors.
// A pipeline stage's memory is built from a configuration whose num_layers is the stage's count;
// stages before the last leave out the final norm, logits and loss buffers (with_output false).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.hpp"
#include "model/gpt_config.hpp"
#include "model/lm_loss.hpp"
#include "model/norm_layer.hpp"
#include "model/parameter_table.hpp"
#include "model/transformer_layer.hpp"

namespace mgt {

// Elements a layout takes, without allocating it: what the memory estimate counts. Counts beyond
// 64 bits saturate at SaturatingSize::kSaturated (core/checked_size.hpp).
struct ActivationElements {
  int64_t floats = 0;
  // Of floats, those stored in fp32 whatever the activation type (norm and softmax statistics,
  // losses, masks: take_fp32); the others take the activation type's size (2 bytes under --bf16
  // on a GPU).
  int64_t fp32_floats = 0;
  int64_t indices = 0;  // int64 each
  int64_t bytes() const;  // as fp32 floats
  // With the activation type's size in bytes for the floats that follow it.
  int64_t bytes(int64_t bytes_per_activation) const;
};

// Rows of logits a whole-model training pass holds at a time: GptModel::forward_backward runs
// the output layer, the loss and their backward chunk by chunk, since [tokens, vocab] logits
// would be a large micro-batch's largest activation (1.6 GB in bf16 at 16 × 1024 tokens and
// GPT-2's vocabulary).
inline constexpr int64_t kTrainingLogitsChunk = 4096;

// Full recomputation's shared buffers (recompute_plan.hpp): one checkpointed group's activation
// sets and the inputs of its later layers, refilled before each group's backward. The memories of
// the micro-batches in flight on a pipeline stage share one, as Megatron's recomputed activations
// exist only during one backward at a time.
struct RecomputeScratch {
  int64_t seq = 0;
  int64_t batch = 0;
  std::vector<DeviceBuffer> owned;
  int64_t fp32_floats = 0;  // of owned's elements, those take_fp32 gave
  std::vector<LayerActivations> sets;
  std::vector<FloatView> inputs;
};

class ActivationMemory {
public:
  // What the constructor with the same arguments allocates, computed without allocating and
  // without wrapping around. Kept beside the constructor: a buffer added there must be counted
  // here (a unit test compares the two).
  static ActivationElements elements(const GptConfig& config, int64_t tp_size, int64_t seq, int64_t batch,
                                     bool training, bool last_position_logits = false,
                                     bool sequence_parallel = false, bool with_output = true,
                                     int64_t logits_rows = 0);

  // The part of elements() that a memory sharing another's RecomputeScratch does not allocate.
  static ActivationElements recompute_scratch_elements(const GptConfig& config, int64_t tp_size, int64_t seq,
                                                       int64_t batch, bool sequence_parallel = false);

  // sequence_parallel needs tp.size > 1 dividing seq. logits_rows > 0: logits for at most that
  // many rows (processed in chunks); 0: for every token (or, last_position_logits, each
  // sequence's last position). share_scratch: another training memory's recompute_scratch() to
  // use, if of this shape, instead of allocating one (its whole-sequence buffers are offered to
  // the tensor-parallel group by the memory that allocated them).
  ActivationMemory(Backend& backend, const GptConfig& config, const TensorParallelRank& tp,
                   int64_t seq, int64_t batch, bool training, bool last_position_logits = false,
                   bool sequence_parallel = false, bool with_output = true, int64_t logits_rows = 0,
                   std::shared_ptr<RecomputeScratch> share_scratch = nullptr);
  ActivationMemory(const ActivationMemory&) = delete;
  ActivationMemory& operator=(const ActivationMemory&) = delete;

  // Elements this one allocated (a shared recompute scratch counted by the memory that allocated it).
  ActivationElements allocated() const;
  // Null without checkpointed layers.
  const std::shared_ptr<RecomputeScratch>& recompute_scratch() const { return recompute_scratch_; }

  int64_t seq() const { return seq_; }
  int64_t batch() const { return batch_; }
  bool training() const { return training_; }
  bool sequence_parallel() const { return sequence_parallel_; }

  // Inputs, sequence-major [s·b].
  IndexView tokens;
  IndexView positions;
  IndexView labels;
  FloatView loss_mask;

  // hidden(l) is the input of layer l, hidden(L) the decoder output.
  FloatView hidden(int64_t l) const { return hidden_[static_cast<size_t>(l)]; }
  // The activations layer l saves (shared between checkpointed groups under full recomputation,
  // between all layers in evaluation).
  const LayerActivations& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  LayerScratch scratch;

  FloatView final_norm_output;  // [s·b, h] ([s/tp·b, h] under sequence parallelism)
  NormStats final_norm;
  FloatView logits;  // [s·b, local vocab] ([b, local vocab] for generation); its gradient in the backward
  LossActivations loss;
  IndexView predictions;  // [s·b] argmax of the logits (evaluation only)
  // Evaluation of selected positions (GptModel::forward_selected): their indices in [s·b] and
  // their labels, compacted.
  IndexView selected_rows;
  IndexView selected_labels;
  FloatView d_hidden;  // [s·b, h] ([s/tp·b, h] under sequence parallelism)
  SequenceParallelScratch sequence;  // [s·b, h] each, under sequence parallelism only
  // The whole-sequence buffers that sequence parallelism's collectives move (the kept norm
  // outputs and `sequence`), allocated shareable: TensorParallelMappings::share.
  const std::vector<FloatView>& tensor_parallel_buffers() const { return shareable_; }

private:
  // An activation, of the backend's activation type (bf16 under --bf16 on a GPU).
  FloatView take(int64_t n);

  // The same, shareable with the other ranks' processes (Backend::allocate_shareable).
  FloatView take_shareable(int64_t n);
  // Statistics, losses and masks: fp32 whatever the activation type, as Megatron keeps them.
  FloatView take_fp32(int64_t n);
  IndexView take_index(int64_t n);
  NormStats take_norm_stats(bool with_mean, int64_t rows);

  int64_t seq_;
  int64_t batch_;
  bool training_;
  bool sequence_parallel_;
  std::vector<DeviceBuffer> owned_;
  std::vector<DeviceBuffer>* sink_ = &owned_;  // where take*() put their buffers
  int64_t fp32_taken_ = 0;                      // elements take_fp32 put in owned_
  std::vector<FloatView> shareable_;
  std::vector<DeviceIndexBuffer> owned_index_;
  std::vector<FloatView> hidden_;
  std::vector<LayerActivations> layers_;
  std::shared_ptr<RecomputeScratch> recompute_scratch_;
  bool owns_recompute_scratch_ = false;
  Backend* backend_;
};

}  // namespace mgt
