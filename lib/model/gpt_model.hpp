// Megatron's GPT model (GPTModel with the local layer spec), written once over the Backend
// interface with an explicit backward per block: embedding → num_layers pre-norm transformer
// layers → final norm → output layer (tied to the word embedding unless untied) → cross-entropy.
//
// forward_backward() accumulates into the gradient buffer the gradient of
//   Σ(CE · loss_mask) / Σ loss_mask / num_microbatches,
// Megatron's per-micro-batch loss (pretrain_gpt.py loss_func, then forward_step's division by
// the number of micro-batches), so that after all micro-batches of an iteration the buffer holds
// the gradient of the mean of the micro-batch losses. Data-parallel averaging is the caller's.
// With LossReduction::kSum (--calculate-per-token-loss) the gradient is that of Σ(CE · loss_mask)
// itself; the caller divides the iteration's gradient by the global batch's tokens (Megatron's
// finalize_model_grads).
// A loss_scale (--fp16's loss scaling) multiplies that gradient; the returned loss sums stay
// unscaled.
//
// Tensor parallelism (a TensorParallelism with the tensor-model-parallel group): Megatron's
// splits, each rank holding its shard of every partitioned tensor (see parameter_table.hpp) —
// vocab-parallel embedding, column-parallel linear_qkv / linear_fc1 / output layer, row-parallel
// linear_proj / linear_fc2, vocab-parallel cross-entropy. Every rank of the group is given the
// same micro-batch and returns the same loss; the loss and the gradients are those of the
// single-rank model with the unsharded parameters. With --sequence-parallel, training passes
// also split the activations outside the tensor-parallel regions along the sequence. Call
// all_reduce_partial_grads() once the iteration's micro-batches are done. Evaluation
// and generation passes run without sequence parallelism (same results, as Megatron's inference).
//
// Pipeline parallelism (a PipelineParallelism with this rank's stage): the model holds its
// stage's part only (pipeline_stage.hpp) and runs through the stage_* calls, one micro-batch
// slot per micro-batch in flight, driven by a pipeline schedule (train/pipeline_schedule.hpp)
// that moves the activations and their gradients between neighbouring stages. The whole-model
// calls (forward_backward, forward_only, forward_selected, forward_cached) need the whole model.
// Each stage computes exactly its layers of the single-rank model, so with the same micro-batches
// the stages together compute the single-rank loss and gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/activation_memory.hpp"
#include "kernels/backend.hpp"
#include "kernels/staged_uploads.hpp"
#include "model/forward_context.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_config.hpp"
#include "model/gpt_embedding.hpp"
#include "model/gpt_parameters.hpp"
#include "model/kv_cache.hpp"
#include "model/lm_loss.hpp"
#include "model/norm_layer.hpp"
#include "model/parameter_hooks.hpp"
#include "model/parallel_linear.hpp"
#include "model/pipeline_stage.hpp"
#include "model/recompute_plan.hpp"
#include "model/context_parallel_attention.hpp"
#include "model/tensor_parallel_mappings.hpp"
#include "model/transformer_layer.hpp"

namespace mgt {

// One micro-batch on the host, batch-major as the data loader produces it. All arrays are
// [b, s]. Learned position embeddings limit s to --max-position-embeddings.
struct MicroBatch {
  int64_t batch_size = 0;  // b
  int64_t seq_length = 0;  // s
  std::span<const int64_t> tokens;
  std::span<const int64_t> position_ids;  // empty: 0…s−1 in every row
  std::span<const int64_t> labels;        // forward_only may leave it empty (no loss)
  std::span<const float> loss_mask;       // empty: every token counts
};

// Megatron's 'lm loss' reduction pair.
// How forward_backward and stage_forward scale a micro-batch's loss into the gradient.
enum class LossReduction {
  kMicroBatchMean,  // Σ(CE · mask) / Σ mask / num_microbatches: Megatron's default
  kSum,             // Σ(CE · mask): --calculate-per-token-loss (megatron/core/pipeline_parallel/
                    // schedules.py forward_step leaves the loss undivided)
};

struct LossSum {
  double loss_sum = 0.0;     // Σ CE · mask
  double token_count = 0.0;  // Σ mask
};

struct ForwardOutput {
  LossSum loss;               // zero without labels
  std::vector<float> losses;  // [b, s] per-token cross-entropy, unmasked; empty without labels
  std::vector<float> logits;  // [b, s, padded vocab] when requested (gathered over TP ranks)
  // [b, s] the id of the largest logit at each position (the first on ties, over the padded
  // vocabulary), when requested: what zero-shot accuracy needs, without the logits.
  std::vector<int64_t> argmax;
};

// How a model instance is split along the pipeline, as the model's constructor takes it.
struct PipelineParallelism {
  PipelineStage stage;  // the default: the whole model
  // With tied embeddings and more than one stage, on the first and last stages: the embedding
  // group (Megatron's, first and last stage of this pipeline), over which the word embedding's
  // gradient is summed. Must outlive the model.
  dist::Communicator* embedding_group = nullptr;
};

struct ExpertParallelism {
  // The expert-model-parallel group (--expert-model-parallel-size ranks, model/moe_layer.hpp);
  // null or a group of one: every rank holds every expert. Must outlive the model.
  dist::Communicator* group = nullptr;
  // With --expert-tensor-parallel-size other than 1 and the tensor-parallel size: Megatron's
  // expert tensor-and-model-parallel group (dist::GroupKind::ExpertTensorAndModelParallel), whose
  // expert-tensor-parallel ranks split each expert's weights and over which the tokens travel.
  // Null otherwise. Must outlive the model.
  dist::Communicator* tensor_and_expert = nullptr;
};

class GptModel {
public:
  // The slot of a stage's evaluation passes (stage_forward without dropout or backward); slots
  // below it are further evaluation slots, for schedules with several in flight.
  static constexpr int64_t kEvaluationSlot = -1;

  // Builds the parameters and initialises them from init_seed (Megatron's --seed); without a
  // seed they stay zero, for a caller about to load them from a checkpoint. Under tensor
  // parallelism each rank initialises its shard of the single-rank model's initial values; the
  // collectives of every later call must be made by all ranks of tp.group together.
  // With expert parallelism each rank holds and runs its share of the experts, and every
  // forward and backward of an MoE layer exchanges tokens over ep.group. A model built for
  // ParameterUse::kInference runs forwards only: it holds no gradients.
  GptModel(const GptConfig& config, Backend& backend, std::optional<uint64_t> init_seed = 1234,
           const TensorParallelism& tp = {}, const PipelineParallelism& pp = {},
           const ExpertParallelism& ep = {}, ParameterUse use = ParameterUse::kTraining);
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;
  ~GptModel();

  const GptConfig& config() const { return params_.config(); }
  GptParameters& parameters() { return params_; }
  const GptParameters& parameters() const { return params_; }
  Backend& backend() const { return *backend_; }
  const TensorParallelMappings& tensor_parallel() const { return tp_; }
  // Whether training passes split the sequence (--sequence-parallel with a group of 2 or more).
  bool sequence_parallel() const { return sequence_parallel_; }
  const PipelineStage& pipeline_stage() const { return params_.pipeline_stage(); }
  // Context parallelism (--context-parallel-size, a group of 2 or more; null or a group of one:
  // none): training passes then take this rank's part of each sequence, as
  // split_for_context_parallel_rank cuts it, and attend over the group as `type` says
  // (context_parallel_attention.hpp). Evaluation and generation passes take whole sequences, as
  // without it. The group must outlive the model; every rank of it makes the same training calls.
  void set_context_parallel(dist::Communicator* group, CpCommType type = CpCommType::kP2p);
  bool context_parallel() const { return context_parallel_ != nullptr; }

  // Training step on one micro-batch, dropout active: accumulates gradients (call
  // parameters().zero_grads() at the start of an iteration). A micro-batch whose loss mask is
  // all zero contributes no gradient (Megatron would divide by zero).
  LossSum forward_backward(const MicroBatch& batch, const DropoutRng& rng,
                           int64_t num_microbatches,
                           LossReduction reduction = LossReduction::kMicroBatchMean, float loss_scale = 1.0f);
  // The same with the loss's sums [Σ CE · mask, Σ mask] left on the device in loss_sums (added to
  // them with `accumulate`): nothing is read back, so the host queues the next micro-batch while
  // the GPU runs this one.
  void forward_backward(const MicroBatch& batch, const DropoutRng& rng, int64_t num_microbatches,
                        LossReduction reduction, float loss_scale, DeviceSpan<double> loss_sums, bool accumulate);

  // The replicated parameters whose gradient each tensor-parallel rank holds a part of: under
  // sequence parallelism those applied to sequence slices (norms, row-parallel biases:
  // ParameterEntry::sequence_parallel), and the query and key norms, each rank's covering its
  // own heads (ParameterEntry::tensor_parallel_partial). This all-reduces those gradients over
  // the tensor-parallel group, as Megatron's finalize_model_grads
  // (_allreduce_non_tensor_model_parallel_grads) does. Call once per iteration, after the last
  // micro-batch's forward_backward and the data-parallel reduction (as Megatron does: that one
  // can then overlap the backward), before the gradients are used (clipping, the optimizer).
  // Nothing to do without such parameters. Collective over the tensor-parallel group.
  void all_reduce_partial_grads();

  // Tells `hooks` (null: nobody; must outlive its use) which parameters each forward is about to
  // read and, during each backward, which gradients are complete (parameter_hooks.hpp).
  void set_parameter_hooks(ParameterHooks* hooks) { hooks_ = hooks; }
  // Whether the gradient of `e` changes after the backward passes, before the data-parallel
  // reduction: at all_reduce_embedding_grads() (a word embedding tied across pipeline stages). A
  // reduction over the data-parallel ranks must wait for that, to sum in the same order as
  // without overlap. (all_reduce_partial_grads() comes after that reduction.)
  bool gradient_finalized_later(const ParameterEntry& e) const;

  // Under FP8 training (config().fp8), this model's FP8 state (amax histories and scales, for
  // checkpoints); null otherwise, or where this stage has no FP8 layer.
  Fp8Training* fp8() { return fp8_.get(); }
  // The data-parallel group whose ranks' amaxes are max-reduced with this rank's (the tensor-
  // parallel group's always are): Megatron's amax reduction group. Must outlive the model.
  void set_fp8_amax_group(dist::Communicator* group) { fp8_amax_group_ = group; }
  // Under expert parallelism, the expert-data-parallel group, over which the routed experts'
  // amaxes are max-reduced instead (Fp8Training::set_expert_amax_reduction). Must outlive the
  // model.
  void set_fp8_expert_amax_group(dist::Communicator* group) { fp8_expert_amax_group_ = group; }

  // Evaluation: no dropout, no gradients.
  ForwardOutput forward_only(const MicroBatch& batch, bool return_logits = false,
                             bool return_argmax = false);

  // Evaluation of the positions whose loss_mask is non-zero only: the output layer, the loss
  // and the argmax run for those rows alone. Zero-shot tasks score a few positions of each row,
  // and over a large vocabulary the output layer dominates a small model's cost. Needs labels;
  // returns losses and (when asked) argmax as [b, s], holding 0 and −1 at unselected positions,
  // and loss = the masked sum. Results equal forward_only's at the selected positions.
  ForwardOutput forward_selected(const MicroBatch& batch, bool return_argmax);

  // Generation with a key/value cache, no dropout: tokens [b, n] (batch-major) are the next n
  // tokens of each of the cache's b sequences, at positions cache.length() … cache.length()+n−1.
  // Appends their keys and values to the cache and returns the logits of the last of them,
  // [b, padded vocab]. The logits equal forward_only's at the same positions of the whole
  // sequences (up to the summation order of the attention).
  std::vector<float> forward_cached(std::span<const int64_t> tokens, int64_t n, KvCache& cache);
  // As forward_cached, but returns each sequence's greedy next token: the first index of the
  // largest of its logits [0, vocab) (the true vocabulary, without the padding), found where the
  // logits are, so that only b tokens come back to the host.
  std::vector<int64_t> forward_cached_greedy(std::span<const int64_t> tokens, int64_t n, KvCache& cache,
                                             int64_t vocab);

  // ---- Pipeline stages ----
  // A slot is 0, 1, … for training passes (one per micro-batch in flight; a slot is reused once
  // its micro-batch's backward is done) or kEvaluationSlot. Activations between stages are the
  // [s, b, h] hidden states, sequence-major ([s/tp, b, h] in a sequence-parallel training pass).
  //
  // Where the previous stage's output for the micro-batch about to run in `slot` goes (not on the
  // first stage); prepares the slot for the micro-batch's shape (only batch_size and seq_length
  // are read).
  // With the interleaved schedule (pipeline_stage().interleaved()) every call names the model
  // chunk of the slot's micro-batch (stage_input or stage_forward; the later calls take it from
  // the slot): chunk v runs its layers only, the embedding with chunk 0 of the first stage, the
  // output layer and the loss with chunk V − 1 of the last.
  FloatView stage_input(int64_t slot, const MicroBatch& shape, int64_t chunk = 0);
  // This stage's part of the micro-batch's forward: from its tokens (first stage) or the received
  // input, through the stage's layers, to the loss (last stage), which it returns as
  // forward_backward does (zero on other stages). Training slots apply dropout from `rng` and keep
  // what stage_backward needs; the last stage scales its loss gradient by loss_scale / (tokens ·
  // num_microbatches). The first stage reads the tokens and positions, the last the labels and
  // loss mask; a stage ignores the rest.
  LossSum stage_forward(int64_t slot, const MicroBatch& batch, const DropoutRng& rng,
                        int64_t num_microbatches,
                        LossReduction reduction = LossReduction::kMicroBatchMean, float loss_scale = 1.0f,
                        int64_t chunk = 0);
  // After stage_forward, not on the last stage: the output to send to the next stage.
  ConstFloatView stage_output(int64_t slot) const;
  // Not on the last stage: where the next stage's input gradient goes before stage_backward.
  FloatView stage_output_grad(int64_t slot);
  // The backward of the slot's training pass; accumulates the stage's parameter gradients.
  void stage_backward(int64_t slot);
  // After stage_backward, not on the first stage: the input gradient to send to the previous
  // stage.
  ConstFloatView stage_input_grad(int64_t slot) const;
  // With tied embeddings over several stages: sums the word embedding's gradient of the first
  // stage and of the last stage's copy over the embedding group, so both take the same step
  // (Megatron's _allreduce_word_embedding_grads). Call once per iteration, after the last
  // micro-batch's backward and before the data-parallel reduction. Nothing to do on other stages
  // or without a pipeline. Collective over the embedding group.
  void all_reduce_embedding_grads();

  // Mixture of Experts: each layer's auxiliary-loss and z-loss statistics ([2 · num_layers],
  // model/moe_router.hpp) summed over the training micro-batches since the last reset; empty
  // for a dense model. Read back with the step's other sums.
  DeviceSpan<const double> moe_statistics() const { return moe_statistics_.view(); }
  void reset_moe_statistics();

private:
  // What one micro-batch in flight on this stage keeps between its forward and backward.
  struct StageSlot {
    std::unique_ptr<ActivationMemory> memory;
    ForwardContext ctx;
    float loss_scale = 0.0f;
    int64_t chunk = 0;  // the model chunk of its micro-batch (interleaved schedule)
  };
  // The layers one pass runs (indices into layers_) and whether it runs the embedding and the
  // output head: all of the stage's, or one chunk of an interleaved rank.
  struct LayerSpan {
    int64_t first = 0;
    int64_t count = 0;
    bool embedding = false;
    bool head = false;
  };
  LayerSpan whole_span() const;
  LayerSpan chunk_span(int64_t chunk) const;
  StageSlot& stage_slot(int64_t slot, const MicroBatch& shape);
  const StageSlot& used_slot(int64_t slot) const;
  void require_whole_model(const char* call) const;
  std::unique_ptr<ActivationMemory> make_memory(const MicroBatch& batch, bool training,
                                                int64_t logits_rows = 0,
                                                std::shared_ptr<RecomputeScratch> share_scratch = nullptr) const;
  // Whether forward_backward runs the output layer and the loss in chunks of rows
  // (kTrainingLogitsChunk): without tensor or sequence parallelism, whose collectives span every
  // row.
  bool chunks_training_logits() const;
  // `memory` made anew for `shape` (make_memory), its whole-sequence buffers (sequence-parallel
  // training only) taken back from the tensor-parallel group before they are freed and the new
  // ones offered to it (TensorParallelMappings::share).
  void renew_memory(std::unique_ptr<ActivationMemory>& memory, const MicroBatch& shape, bool training,
                    int64_t logits_rows,
                    std::shared_ptr<RecomputeScratch> share_scratch = nullptr);

  ActivationMemory& memory_for(const MicroBatch& batch, bool training);
  // Copies the micro-batch's inputs (tokens, positions) and labels (labels, loss mask) in.
  void upload(const MicroBatch& batch, ActivationMemory& memory, bool inputs = true,
              bool labels = true);
  // Megatron's position ids of a micro-batch, sequence-major (checked, or 0…s−1 when it has none).
  std::vector<int64_t> position_ids(const MicroBatch& batch) const;
  // This stage's forward and backward over `memory`: embedding (first stage), layers, and the
  // final norm, output layer and loss (last stage); the whole model without a pipeline.
  void forward_pass(const ForwardContext& ctx, ActivationMemory& memory, bool with_loss,
                    std::optional<LayerSpan> span = {});
  // Embedding, layers and final norm: fills memory.final_norm_output.
  void decoder_pass(const ForwardContext& ctx, ActivationMemory& memory, std::optional<LayerSpan> span = {});
  // How far the output layer's backward has gone when backward_pass starts.
  enum class HeadGradient {
    kNone,           // the loss's backward is still to run
    kLogits,         // the logits hold their gradient (the fused loss step of forward_backward)
    kInputGradient,  // scratch.hidden_a holds the final norm output's gradient (chunked head)
  };
  void backward_pass(const ForwardContext& ctx, ActivationMemory& memory, float loss_scale,
                     HeadGradient head = HeadGradient::kNone, std::optional<LayerSpan> span = {});
  // Full recomputation: the forward of a checkpointed group of layers rerun from its kept input
  // into the group's shared buffers, just before the group's backward (recompute_plan.hpp); the
  // group's layers counted from layers_[first_layer] (the pass's chunk).
  void recompute_group(const ForwardContext& ctx, const ActivationMemory& memory, const RecomputeGroup& group,
                       int64_t first_layer) const;
  // The output layer, the fused loss and the output layer's backward, chunk by chunk of
  // memory.logits' rows: losses into memory.loss, the final norm output's gradient into
  // memory.scratch.hidden_a, the output weight's gradient accumulated.
  void head_forward_backward_in_chunks(const ForwardContext& ctx, ActivationMemory& memory, float scale);
  // Both forward_backward()s up to the loss's sums, which are in the returned activations.
  const ActivationMemory& run_forward_backward(const MicroBatch& batch, const DropoutRng& rng,
                                               int64_t num_microbatches, LossReduction reduction, float loss_scale);
  // forward_cached's pass, leaving the [b, padded vocab] logits in backend memory. One-token
  // steps are recorded on their second run for a cache and replayed after that (one launch per
  // step on a GPU).
  ConstFloatView decode_step(std::span<const int64_t> tokens, int64_t n, KvCache& cache);
  // The whole-vocabulary logits of `rows` rows from this rank's [rows, local vocab] ones: the
  // logits themselves without tensor parallelism, else gathered into `whole`.
  ConstFloatView whole_vocab_logits(ConstFloatView logits, int64_t rows,
                                    DeviceBuffer& whole) const;

  // Before a forward: the compute copy refreshed, once the hooks have seen it read everything.
  void prepare_parameters();
  // The hooks' notices around block `index` of block_ranges_.
  void before_block(std::size_t index) const;
  void block_gradients_done(std::size_t index);
  // Flat-buffer ranges of the blocks, in forward order: [embedding], each layer, [final norm and
  // output layer (with the last stage's copy of a tied word embedding)].
  struct BlockRange {
    int64_t begin = 0;
    int64_t end = 0;
  };
  std::vector<BlockRange> block_ranges_;
  std::size_t first_layer_block() const { return embedding_ ? 1 : 0; }

  ParameterHooks* hooks_ = nullptr;
  Backend* backend_;
  // Made before the layers, which take FP8 indices from it; null without FP8 layers here.
  std::unique_ptr<Fp8Training> fp8_;
  dist::Communicator* fp8_amax_group_ = nullptr;
  dist::Communicator* fp8_expert_amax_group_ = nullptr;
  TensorParallelMappings tp_;
  bool sequence_parallel_;
  std::unique_ptr<ContextParallelAttention> context_parallel_;  // null without context parallelism
  GptParameters params_;
  GptConfig stage_config_;  // the configuration with this stage's (interleaved: one chunk's) number of layers
  dist::Communicator* embedding_group_;  // null: no word embedding shared across stages
  // The embedding on the first stage, the output head on the last (both: the whole model).
  std::optional<GptEmbedding> embedding_;
  std::vector<TransformerLayer> layers_;
  std::optional<NormLayer> final_norm_;
  std::optional<ColumnParallelLinear> output_layer_;
  std::optional<LanguageModelLoss> loss_;
  // The partial gradients (all_reduce_partial_grads), packed for one all-reduce: where each lies
  // in the gradient buffer and in the packed one, and the way back.
  std::vector<CopyRange> partial_grads_pack_;
  std::vector<CopyRange> partial_grads_unpack_;
  DeviceBuffer partial_grads_;
  DeviceArray<double> moe_statistics_;
  std::unique_ptr<ActivationMemory> train_memory_;
  std::unique_ptr<ActivationMemory> eval_memory_;
  std::unique_ptr<ActivationMemory> generation_memory_;  // forward_cached of several tokens
  std::unique_ptr<ActivationMemory> step_memory_;        // forward_cached of one token
  // The recorded one-token decode step over step_memory_ and one cache's buffers.
  struct DecodeRecording {
    uint64_t cache_id = 0;
    int64_t runs = 0;     // steps run for this cache
    bool failed = false;  // the backend could not record the step: run it directly
    std::unique_ptr<RecordedOperations> operations;
  };
  DecodeRecording decode_recording_;
  DeviceIndexBuffer decode_tokens_;  // forward_cached_greedy's picks
  // The inputs of upload() and of the decode steps, on their way to the device.
  StagedUploads staging_{*backend_};
  std::vector<StageSlot> stage_slots_;
  std::vector<StageSlot> stage_eval_slots_;
};

}  // namespace mgt
