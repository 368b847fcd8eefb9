#include "model/gpt_model.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "model/gpt_model_internal.hpp"

namespace mgt {

using gpt_model_internal::check_input;
using gpt_model_internal::loss_gradient_scale;
using gpt_model_internal::require;
using gpt_model_internal::transpose_01;

namespace {

// This rank's place among the expert-parallel ranks and, where the experts have expert-tensor-
// parallel ranks of their own, among those (group rank = expert-tensor rank + size · ep rank).
ExpertParallelRank expert_parallel_rank(const ExpertParallelism& ep) {
  ExpertParallelRank r;
  if (ep.group) r = {ep.group->size(), ep.group->rank()};
  if (ep.tensor_and_expert && ep.tensor_and_expert->size() > r.size) {
    r.tensor_size = ep.tensor_and_expert->size() / r.size;
    r.tensor_rank = ep.tensor_and_expert->rank() % r.tensor_size;
    if (ep.tensor_and_expert->size() != r.size * r.tensor_size || ep.tensor_and_expert->rank() / r.tensor_size != r.rank)
      throw Error("internal error: the expert tensor-and-model-parallel group (" + ep.tensor_and_expert->description() +
                  ") does not match the expert-model-parallel group");
  }
  return r;
}

std::string output_weight_name(const GptConfig& config) {
  return config.untie_embeddings_and_output_weights ? "output_layer.weight"
                                                    : "embedding.word_embeddings.weight";
}

}  // namespace

GptModel::GptModel(const GptConfig& config, Backend& backend, std::optional<uint64_t> init_seed,
                   const TensorParallelism& tp, const PipelineParallelism& pp, const ExpertParallelism& ep,
                   ParameterUse use)
    : backend_(&backend),
      tp_(backend, tp.group),
      sequence_parallel_(tp.sequence_parallel && tp_.active()),
      params_(config, backend, tp_.tensor_parallel_rank(), pp.stage,
              expert_parallel_rank(ep), use),
      stage_config_(params_.config()),
      embedding_group_(nullptr) {
  const PipelineStage& stage = params_.pipeline_stage();
  // Activations are kept per pass, and a pass of an interleaved rank runs one chunk.
  stage_config_.num_layers = stage.chunk_layers(params_.config().num_layers);
  // The MoE buffers are sized for the expert-parallel group this model runs with.
  stage_config_.moe.expert_model_parallel_size = params_.expert_parallel().size;
  stage_config_.moe.expert_row_replicas = std::max<int64_t>(1, params_.expert_parallel().tensor_size);
  stage_config_.moe.sequence_parallel_size = sequence_parallel_ ? tp_.size() : 1;
  if (stage_config_.moe.enabled()) {
    // The stage's layers by their local index, as its activation sets are numbered; an
    // interleaved rank's chunks share the sets of one index, MoE buffers if any chunk's layer
    // there is an MoE layer.
    const int64_t total = params_.config().num_layers;
    std::vector<bool> local(static_cast<std::size_t>(stage_config_.num_layers), false);
    for (int64_t l = 0; l < stage.layers_of(total); ++l)
      if (params_.config().moe.is_moe_layer(stage.layer_at(l, total)))
        local[static_cast<std::size_t>(l % stage_config_.num_layers)] = true;
    stage_config_.moe.layer_pattern = std::move(local);
  }
  // Refuses a recomputation Megatron cannot run on this stage before anything is allocated.
  static_cast<void>(RecomputePlan(stage_config_, stage_config_.num_layers, true));
  if (params_.config().moe.enabled()) {
    moe_statistics_ = DeviceArray<double>(backend, 2 * params_.config().num_layers);
    reset_moe_statistics();
  }
  if (stage.is_first()) embedding_.emplace(params_, tp_);
  const int64_t all_layers = params_.config().num_layers;
  const int64_t stage_layers = stage.layers_of(all_layers);
  const std::optional<Fp8Recipe>& fp8 = params_.config().fp8;
  const auto in_fp8 = [&](int64_t layer) { return fp8 && fp8->layer_in_fp8(layer, all_layers); };
  // FP8 linear layers of the stage: attention's two, and a dense MLP's two or an MoE layer's
  // shared experts' two (if any) and its local experts' two each (Fp8Training keeps those apart).
  int64_t fp8_linears = 0;
  int64_t fp8_expert_linears = 0;
  const MoeConfig& moe = params_.config().moe;
  for (int64_t l = 0; l < stage_layers; ++l) {
    const int64_t layer = stage.layer_at(l, all_layers);
    if (!in_fp8(layer)) continue;
    const bool moe_layer = moe.is_moe_layer(layer);
    fp8_linears += 2 + (!moe_layer || moe.shared_expert_intermediate_size > 0 ? 2 : 0);
    if (moe_layer) fp8_expert_linears += 2 * (moe.num_experts / params_.expert_parallel().size);
  }
  if (fp8_linears > 0) {
    fp8_ = std::make_unique<Fp8Training>(*fp8, backend, fp8_linears, fp8_expert_linears);
    fp8_->set_keep_input_columns(params_.config().recompute_granularity != RecomputeGranularity::kFull);
    fp8_->set_amax_reduction([this](FloatView amax) {
      if (tp_.active()) tp_.all_reduce(amax, dist::ReduceOp::Max);
      if (fp8_amax_group_ != nullptr && fp8_amax_group_->size() > 1) fp8_amax_group_->all_reduce(amax, dist::ReduceOp::Max);
    });
    // Under expert parallelism an expert's amaxes are those of the ranks that hold it: its
    // tensor-parallel slices' (unless the experts are whole on every rank) and its expert-data-
    // parallel copies'. Without it every rank holds every expert, and the dense reduction is the
    // experts' too.
    if (fp8_expert_linears > 0 && params_.expert_parallel().size > 1) {
      const bool sliced = tp_.active() && !moe.experts_whole(tp_.size());
      fp8_->set_expert_amax_reduction([this, sliced](FloatView amax) {
        if (sliced) tp_.all_reduce(amax, dist::ReduceOp::Max);
        if (fp8_expert_amax_group_ != nullptr && fp8_expert_amax_group_->size() > 1)
          fp8_expert_amax_group_->all_reduce(amax, dist::ReduceOp::Max);
      });
    }
  }
  layers_.reserve(static_cast<size_t>(stage_layers));
  for (int64_t l = 0; l < stage_layers; ++l) {
    const int64_t layer = stage.layer_at(l, all_layers);
    layers_.emplace_back(params_, layer, tp_, in_fp8(layer) ? fp8_.get() : nullptr,
                         params_.expert_parallel().tensor_size > 0 ? ep.tensor_and_expert : ep.group);
  }
  if (fp8_) fp8_->require_complete();
  if (stage.is_last()) {
    final_norm_.emplace(params_, "decoder.final_layernorm");
    output_layer_.emplace(params_, output_weight_name(params_.config()), "", tp_);
    loss_.emplace(params_, tp_);
  }
  if (!stage.whole_model() && !params_.config().untie_embeddings_and_output_weights &&
      (stage.is_first() || stage.is_last())) {
    require(pp.embedding_group != nullptr && pp.embedding_group->size() == 2,
            "a pipeline with tied embeddings needs the embedding group (first and last stage) on "
            "its first and last stages");
    embedding_group_ = pp.embedding_group;
  }
  if (tp_.active()) {
    int64_t packed = 0;
    for (const ParameterEntry& e : params_.entries()) {
      if (!(sequence_parallel_ && e.sequence_parallel) && !e.tensor_parallel_partial) continue;
      partial_grads_pack_.push_back({e.offset, packed, e.numel()});
      partial_grads_unpack_.push_back({packed, e.offset, e.numel()});
      packed += e.numel();
    }
    if (packed > 0) partial_grads_ = DeviceBuffer(backend, packed);
  }
  if (init_seed) params_.initialize(*init_seed);
  // The blocks' ranges, from the parameter names (parameter_table.cpp's order is the forward's).
  const std::size_t blocks = (embedding_ ? 1 : 0) + layers_.size() + (final_norm_ ? 1 : 0);
  block_ranges_.assign(blocks, BlockRange{params_.table().buffer_size, 0});
  for (const ParameterEntry& e : params_.entries()) {
    std::size_t block = blocks - 1;  // the head
    if (e.name.starts_with("embedding.") && stage.is_first()) {
      block = 0;
    } else if (e.name.starts_with("decoder.layers.")) {
      const int64_t layer = std::stoll(e.name.substr(std::string("decoder.layers.").size()));
      block = first_layer_block() + static_cast<std::size_t>(stage.local_index(layer, params_.config().num_layers));
    }
    BlockRange& r = block_ranges_.at(block);
    r.begin = std::min(r.begin, e.offset);
    r.end = std::max(r.end, e.offset + e.numel());
  }
}

bool GptModel::gradient_finalized_later(const ParameterEntry& e) const {
  return embedding_group_ != nullptr && e.name == "embedding.word_embeddings.weight";
}

void GptModel::prepare_parameters() {
  // A stale compute copy is converted whole, from parameters that must all have arrived. A fresh
  // one (the distributed optimizer's gathers bring the updated bf16 weights themselves) is
  // waited for block by block (before_block).
  if (hooks_ && params_.compute_copy_stale())
    hooks_->before_parameter_use(0, params_.table().buffer_size);
  params_.refresh_compute_copy();
  // Evaluation and generation cast with the current FP8 scales and record nothing; a training
  // pass says otherwise right after.
  if (fp8_) fp8_->begin_forward(kEvaluationSlot, false);
}

void GptModel::before_block(std::size_t index) const {
  if (!hooks_) return;
  const BlockRange& r = block_ranges_.at(index);
  if (r.begin < r.end) hooks_->before_parameter_use(r.begin, r.end);
}

void GptModel::block_gradients_done(std::size_t index) {
  if (!hooks_) return;
  // The reduction about to start reads the block's gradients: any its backward left unwritten
  // (GptParameters::zero_grads) are zeroed now.
  const BlockRange& r = block_ranges_.at(index);
  if (r.begin < r.end) params_.settle_grads(r.begin, r.end);
  hooks_->gradients_done_from(index == 0 ? 0 : r.begin);
}

GptModel::~GptModel() = default;

void GptModel::set_context_parallel(dist::Communicator* group, CpCommType type) {
  context_parallel_ =
      group != nullptr && group->size() > 1 ? make_context_parallel_attention(type, *backend_, *group) : nullptr;
}

void GptModel::require_whole_model(const char* call) const {
  require(pipeline_stage().whole_model(),
          std::string(call) + " needs the whole model; pipeline stages run through stage_forward and "
                              "stage_backward");
}

std::unique_ptr<ActivationMemory> GptModel::make_memory(const MicroBatch& batch, bool training,
                                                        int64_t logits_rows,
                                                        std::shared_ptr<RecomputeScratch> share_scratch) const {
  require(batch.batch_size > 0 && batch.seq_length > 0,
          "a micro-batch needs batch_size and seq_length > 0");
  return std::make_unique<ActivationMemory>(*backend_, stage_config_, params_.tensor_parallel(),
                                            batch.seq_length, batch.batch_size, training, false,
                                            training && sequence_parallel_,
                                            pipeline_stage().is_last(), logits_rows, std::move(share_scratch));
}

void GptModel::renew_memory(std::unique_ptr<ActivationMemory>& memory, const MicroBatch& shape, bool training,
                            int64_t logits_rows,
                            std::shared_ptr<RecomputeScratch> share_scratch) {
  if (memory) {
    for (const FloatView buffer : memory->tensor_parallel_buffers()) tp_.unshare(buffer);
  }
  memory.reset();  // release the old shape's buffers before allocating the new ones
  memory = make_memory(shape, training, logits_rows, std::move(share_scratch));
  for (const FloatView buffer : memory->tensor_parallel_buffers()) tp_.share(buffer);
}

bool GptModel::chunks_training_logits() const { return !tp_.active() && !sequence_parallel_; }

ActivationMemory& GptModel::memory_for(const MicroBatch& batch, bool training) {
  std::unique_ptr<ActivationMemory>& memory = training ? train_memory_ : eval_memory_;
  if (!memory || memory->seq() != batch.seq_length || memory->batch() != batch.batch_size)
    renew_memory(memory, batch, training, training && chunks_training_logits() ? kTrainingLogitsChunk : 0);
  return *memory;
}

void GptModel::upload(const MicroBatch& batch, ActivationMemory& memory, bool inputs,
                      bool labels) {
  const int64_t b = batch.batch_size;
  const int64_t s = batch.seq_length;
  const int64_t n = b * s;
  const int64_t vocab = config().padded_vocab_size;
  require(b == memory.batch() && s == memory.seq(),
          "a micro-batch of " + std::to_string(b) + " × " + std::to_string(s) +
              " tokens given to activations of " + std::to_string(memory.batch()) + " × " +
              std::to_string(memory.seq()));
  const bool learned = config().position_embedding_type == PositionEmbeddingType::kLearnedAbsolute;
  const bool with_labels = labels && !batch.labels.empty();
  // Every check first: a bad micro-batch throws before anything is staged.
  if (inputs) check_input(batch.tokens, n, "tokens", vocab);
  std::vector<int64_t> positions;
  if (inputs && learned) positions = position_ids(batch);
  if (with_labels) {
    check_input(batch.labels, n, "labels", vocab);
    if (!batch.loss_mask.empty()) check_input(batch.loss_mask, n, "loss_mask", 0);
  }

  // Queued without the host waiting: the previous micro-batch still runs on the device
  // meanwhile, and the copies follow it in the queue.
  staging_.begin(3 * n, n);
  if (inputs) {
    staging_.put(transpose_01(batch.tokens, b, s, 1), memory.tokens);
    if (learned) staging_.put(positions, memory.positions);
  }
  if (with_labels) {
    staging_.put(transpose_01(batch.labels, b, s, 1), memory.labels);
    if (batch.loss_mask.empty()) {
      backend_->fill(memory.loss_mask, 1.0f);
    } else {
      staging_.put(transpose_01(batch.loss_mask, b, s, 1), DeviceSpan<float>(memory.loss_mask.data(), n));
    }
  }
  staging_.end();
}

std::vector<int64_t> GptModel::position_ids(const MicroBatch& batch) const {
  const int64_t b = batch.batch_size;
  const int64_t s = batch.seq_length;
  const int64_t n = b * s;
  if (!batch.position_ids.empty()) {
    check_input(batch.position_ids, n, "position_ids", config().max_position_embeddings);
    return transpose_01(batch.position_ids, b, s, 1);
  }
  require(s <= config().max_position_embeddings,
          "sequence length " + std::to_string(s) + " exceeds --max-position-embeddings " +
              std::to_string(config().max_position_embeddings));
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < b; ++j) positions[static_cast<size_t>(i * b + j)] = i;
  }
  return positions;
}

GptModel::LayerSpan GptModel::whole_span() const {
  return {0, static_cast<int64_t>(layers_.size()), embedding_.has_value(), output_layer_.has_value()};
}

GptModel::LayerSpan GptModel::chunk_span(int64_t chunk) const {
  const PipelineStage& stage = pipeline_stage();
  require(chunk >= 0 && chunk < stage.virtual_size,
          "model chunk " + std::to_string(chunk) + " of a stage with " + std::to_string(stage.virtual_size));
  if (!stage.interleaved()) return whole_span();
  const int64_t per_chunk = stage_config_.num_layers;
  return {chunk * per_chunk, per_chunk, embedding_.has_value() && chunk == 0,
          output_layer_.has_value() && chunk == stage.virtual_size - 1};
}

void GptModel::decoder_pass(const ForwardContext& ctx, ActivationMemory& memory, std::optional<LayerSpan> span) {
  const LayerSpan run = span.value_or(whole_span());
  const int64_t num_layers = run.count;
  if (run.embedding) {
    before_block(0);
    embedding_->forward(ctx, memory.tokens, memory.positions, memory.scratch.hidden_a,
                        memory.sequence, memory.hidden(0));
  }
  // memory holds the span's activations: its layer l is the model's layers_[run.first + l].
  for (int64_t l = 0; l < num_layers; ++l) {
    const auto index = static_cast<size_t>(run.first + l);
    before_block(first_layer_block() + index);
    layers_[index].forward(ctx, memory.hidden(l), memory.layer(l), memory.scratch, memory.hidden(l + 1));
  }
  if (run.head) {
    before_block(block_ranges_.size() - 1);
    final_norm_->forward(memory.hidden(num_layers), ctx.local_tokens(), memory.final_norm_output,
                         memory.final_norm);
  }
}

void GptModel::forward_pass(const ForwardContext& ctx, ActivationMemory& memory, bool with_loss,
                            std::optional<LayerSpan> span) {
  const int64_t tokens = ctx.tokens();
  const LayerSpan run = span.value_or(whole_span());
  decoder_pass(ctx, memory, run);
  if (!run.head) return;
  output_layer_->forward(memory.final_norm_output, tokens, memory.logits,
                         ctx.when_sequence_parallel(memory.sequence.gathered));
  if (with_loss) loss_->forward(memory.logits, memory.labels, tokens, memory.loss);
}

void GptModel::head_forward_backward_in_chunks(const ForwardContext& ctx, ActivationMemory& memory, float scale) {
  const int64_t tokens = ctx.tokens();
  const int64_t h = config().hidden_size;
  const int64_t vocab = loss_->local_vocab();
  const int64_t chunk = memory.logits.size() / vocab;
  for (int64_t start = 0; start < tokens; start += chunk) {
    const int64_t rows = std::min(chunk, tokens - start);
    const FloatView x = memory.final_norm_output.subspan(start * h, rows * h);
    const FloatView logits = memory.logits.first(rows * vocab);
    const LossActivations loss = memory.loss.rows(start, rows);
    output_layer_->forward(x, rows, logits, {});
    loss_->forward_backward(logits, memory.labels.subspan(start, rows), memory.loss_mask.subspan(start, rows), scale,
                            rows, loss);
    output_layer_->backward(logits, x, rows, memory.scratch.hidden_a.subspan(start * h, rows * h), {}, {});
  }
}

void GptModel::backward_pass(const ForwardContext& ctx, ActivationMemory& memory,
                             float loss_scale, HeadGradient head, std::optional<LayerSpan> span) {
  const int64_t tokens = ctx.tokens();
  const LayerSpan run = span.value_or(whole_span());
  const int64_t num_layers = run.count;
  const RecomputePlan plan(stage_config_, num_layers, true);

  // On stages before the last, d_hidden already holds the gradient of the stage's output.
  if (run.head) {
    if (head == HeadGradient::kNone) {
      loss_->backward(memory.logits, memory.labels, memory.loss_mask, loss_scale, tokens,
                      memory.loss);
    }
    if (head != HeadGradient::kInputGradient) {
      output_layer_->backward(memory.logits, memory.final_norm_output, tokens, memory.scratch.hidden_a,
                              ctx.when_sequence_parallel(memory.sequence.gathered),
                              ctx.when_sequence_parallel(memory.sequence.whole));
    }
    final_norm_->backward(memory.scratch.hidden_a, memory.hidden(num_layers), ctx.local_tokens(),
                          memory.final_norm, memory.d_hidden);
    block_gradients_done(block_ranges_.size() - 1);
  }
  for (int64_t l = num_layers - 1; l >= 0; --l) {
    const auto index = static_cast<size_t>(run.first + l);
    const TransformerLayer& layer = layers_[index];
    const RecomputeGroup group = plan.group_of(l);
    if (group.checkpointed && l == group.first + group.count - 1) recompute_group(ctx, memory, group, run.first);
    layer.backward(ctx, memory.hidden(l), memory.layer(l), memory.scratch, memory.d_hidden);
    block_gradients_done(first_layer_block() + index);
  }
  if (run.embedding) {
    embedding_->backward(ctx, memory.tokens, memory.positions, memory.sequence, memory.d_hidden);
  }
  // Everything is final now (also on a stage whose blocks leave the buffer's start to none). An
  // interleaved rank's later chunks lie after chunk 0 in the buffer and finish before its last
  // backward, which is chunk 0's. The gradients no write reached (an expert no token chose, on
  // every micro-batch) are zeroed then.
  if (run.first == 0) {
    params_.settle_grads();
    block_gradients_done(0);
  }
}

void GptModel::recompute_group(const ForwardContext& ctx, const ActivationMemory& memory,
                               const RecomputeGroup& group, int64_t first_layer) const {
  // Same inputs and dropout keys as the first forward, so the same activations, bit for bit.
  // The group's output is kept (the next group's input, or the stage's output): the last layer's
  // recomputed one goes to scratch, unread.
  const int64_t last = group.first + group.count - 1;
  ForwardContext again = ctx;
  again.recomputation = true;
  for (int64_t l = group.first; l <= last; ++l) {
    layers_[static_cast<size_t>(first_layer + l)].forward(again, memory.hidden(l), memory.layer(l), memory.scratch,
                                            l == last ? memory.scratch.hidden_b : memory.hidden(l + 1));
  }
}

ConstFloatView GptModel::whole_vocab_logits(ConstFloatView logits, int64_t rows,
                                            DeviceBuffer& whole) const {
  if (!tp_.active()) return logits;
  whole = DeviceBuffer(*backend_, rows * config().padded_vocab_size, logits.type());
  tp_.gather_from_tensor_region_forward(logits, rows, whole.view());
  return whole.view();
}

void GptModel::all_reduce_partial_grads() {
  if (partial_grads_.empty()) return;
  const FloatView packed = partial_grads_.view();
  backend_->copy_ranges(params_.grads(), packed, partial_grads_pack_);
  tp_.all_reduce(packed, dist::ReduceOp::Sum);
  backend_->copy_ranges(packed, params_.grads(), partial_grads_unpack_);
}

void GptModel::reset_moe_statistics() {
  if (moe_statistics_.view().empty()) return;
  const std::vector<double> zeros(static_cast<std::size_t>(moe_statistics_.view().size()), 0.0);
  backend_->copy_from_host<double>(zeros, moe_statistics_.view());
}

LossSum GptModel::forward_backward(const MicroBatch& batch, const DropoutRng& rng,
                                   int64_t num_microbatches, LossReduction reduction, float loss_scale) {
  const ActivationMemory& memory = run_forward_backward(batch, rng, num_microbatches, reduction, loss_scale);
  const MaskedLossSum sum = backend_->masked_loss_sum(memory.loss.losses, memory.loss_mask);
  return {sum.loss_sum, sum.tokens};
}

void GptModel::forward_backward(const MicroBatch& batch, const DropoutRng& rng, int64_t num_microbatches,
                                LossReduction reduction, float loss_scale, DeviceSpan<double> loss_sums,
                                bool accumulate) {
  const ActivationMemory& memory = run_forward_backward(batch, rng, num_microbatches, reduction, loss_scale);
  backend_->masked_loss_sum_on_device(memory.loss.losses, memory.loss_mask, loss_sums, accumulate);
}

const ActivationMemory& GptModel::run_forward_backward(const MicroBatch& batch, const DropoutRng& rng,
                                                       int64_t num_microbatches, LossReduction reduction,
                                                       float loss_scale) {
  require_whole_model("forward_backward");
  require(!params_.for_inference(), "a model built for inference has no backward");
  prepare_parameters();
  require(num_microbatches >= 1, "num_microbatches must be >= 1");
  require(!batch.labels.empty(), "forward_backward needs labels");
  ActivationMemory& memory = memory_for(batch, true);
  upload(batch, memory);
  ForwardContext ctx{batch.seq_length, batch.batch_size, true, rng,
                     sequence_parallel_ ? tp_.size() : 1,
                     sequence_parallel_ ? tp_.rank() : 0, context_parallel_.get()};
  // Megatron's MoEAuxLossAutoScaler: the auxiliary losses' gradient times loss_scale /
  // num_microbatches; with the per-token loss, times the micro-batch's tokens instead (the
  // gradients are divided by the global batch's tokens afterwards).
  ctx.moe_statistics = moe_statistics_.view();
  ctx.moe_loss_grad_scale = reduction == LossReduction::kSum
                                ? loss_scale * static_cast<float>(ctx.tokens())
                                : loss_scale / static_cast<float>(num_microbatches);
  // The loss gradient's scale from the host's mask, so that the loss and its gradient come from
  // one pass over the logits and nothing is read back before the backward is queued.
  MaskedLossSum host_count;
  for (const float m : batch.loss_mask) host_count.tokens += m;
  if (batch.loss_mask.empty()) host_count.tokens = static_cast<double>(batch.batch_size * batch.seq_length);
  const float scale = loss_gradient_scale(host_count, num_microbatches, reduction, loss_scale);
  if (fp8_) fp8_->begin_forward(Fp8Training::kWholeModelSlot, true);
  decoder_pass(ctx, memory);
  if (fp8_) {
    fp8_->finish_forward();
    fp8_->begin_backward(Fp8Training::kWholeModelSlot);
  }
  if (chunks_training_logits()) {
    head_forward_backward_in_chunks(ctx, memory, scale);
    backward_pass(ctx, memory, scale, HeadGradient::kInputGradient);
  } else {
    output_layer_->forward(memory.final_norm_output, ctx.tokens(), memory.logits,
                           ctx.when_sequence_parallel(memory.sequence.gathered));
    loss_->forward_backward(memory.logits, memory.labels, memory.loss_mask, scale, ctx.tokens(), memory.loss);
    backward_pass(ctx, memory, scale, HeadGradient::kLogits);
  }
  if (fp8_) fp8_->finish_backward();
  return memory;
}

ForwardOutput GptModel::forward_only(const MicroBatch& batch, bool return_logits,
                                     bool return_argmax) {
  require_whole_model("forward_only");
  prepare_parameters();
  ActivationMemory& memory = memory_for(batch, false);
  upload(batch, memory);
  const bool with_loss = !batch.labels.empty();
  const ForwardContext ctx{batch.seq_length, batch.batch_size, false, {}};
  forward_pass(ctx, memory, with_loss);

  const int64_t b = batch.batch_size;
  const int64_t s = batch.seq_length;
  ForwardOutput out;
  if (with_loss) {
    const MaskedLossSum sum = backend_->masked_loss_sum(memory.loss.losses, memory.loss_mask);
    out.loss = {sum.loss_sum, sum.tokens};
    std::vector<float> losses(static_cast<size_t>(b * s));
    backend_->copy_to_host(memory.loss.losses, losses);
    out.losses = transpose_01<float>(losses, s, b, 1);
  }
  if (!return_argmax && !return_logits) return out;
  const int64_t vocab = config().padded_vocab_size;
  DeviceBuffer gathered;
  const ConstFloatView all_logits = whole_vocab_logits(memory.logits, s * b, gathered);
  if (return_argmax) {
    backend_->row_argmax(all_logits, s * b, vocab, memory.predictions);
    std::vector<int64_t> argmax(static_cast<size_t>(b * s));
    backend_->copy_to_host(memory.predictions, argmax);
    out.argmax = transpose_01<int64_t>(argmax, s, b, 1);
  }
  if (return_logits) {
    std::vector<float> logits(static_cast<size_t>(b * s * vocab));
    backend_->copy_to_host(all_logits, logits);
    out.logits = transpose_01<float>(logits, s, b, vocab);
  }
  return out;
}

ForwardOutput GptModel::forward_selected(const MicroBatch& batch, bool return_argmax) {
  require_whole_model("forward_selected");
  prepare_parameters();
  require(!batch.labels.empty(), "forward_selected needs labels");
  ActivationMemory& memory = memory_for(batch, false);
  upload(batch, memory);
  const int64_t b = batch.batch_size;
  const int64_t s = batch.seq_length;
  const int64_t h = config().hidden_size;
  const int64_t vocab = config().padded_vocab_size;

  // The selected positions in the activations' sequence-major order, and their labels.
  std::vector<int64_t> rows;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < b; ++j) {
      const size_t k = static_cast<size_t>(j * s + i);
      if (batch.loss_mask.empty() || batch.loss_mask[k] != 0.0f) {
        rows.push_back(i * b + j);
        labels.push_back(batch.labels[k]);
      }
    }
  const auto m = static_cast<int64_t>(rows.size());

  ForwardOutput out;
  out.losses.assign(static_cast<size_t>(b * s), 0.0f);
  if (return_argmax) out.argmax.assign(static_cast<size_t>(b * s), -1);
  if (m == 0) return out;

  const ForwardContext ctx{s, b, false, {}};
  decoder_pass(ctx, memory);
  backend_->copy_from_host<int64_t>(rows, memory.selected_rows.first(m));
  backend_->copy_from_host<int64_t>(labels, memory.selected_labels.first(m));
  // Gather the selected rows of the final norm's output (a row lookup, as in the embedding),
  // then the output layer and the loss on those rows only.
  const FloatView selected = memory.scratch.hidden_a.first(m * h);
  backend_->embedding_forward(memory.selected_rows.first(m), memory.final_norm_output, 0, h, selected);
  const FloatView logits = memory.logits.first(m * loss_->local_vocab());
  output_layer_->forward(selected, m, logits);
  const LossActivations loss = memory.loss.rows(0, m);
  loss_->forward(logits, memory.selected_labels.first(m), m, loss);

  std::vector<float> losses(static_cast<size_t>(m));
  backend_->copy_to_host(loss.losses, losses);
  std::vector<int64_t> argmax;
  if (return_argmax) {
    DeviceBuffer gathered;
    backend_->row_argmax(whole_vocab_logits(logits, m, gathered), m, vocab,
                         memory.predictions.first(m));
    argmax.resize(static_cast<size_t>(m));
    backend_->copy_to_host(memory.predictions.first(m), argmax);
  }
  for (int64_t r = 0; r < m; ++r) {
    const int64_t i = rows[static_cast<size_t>(r)] / b;
    const int64_t j = rows[static_cast<size_t>(r)] % b;
    const size_t k = static_cast<size_t>(j * s + i);
    out.losses[k] = losses[static_cast<size_t>(r)];
    out.loss.loss_sum += static_cast<double>(losses[static_cast<size_t>(r)]) *
                         (batch.loss_mask.empty() ? 1.0 : batch.loss_mask[k]);
    out.loss.token_count += batch.loss_mask.empty() ? 1.0 : batch.loss_mask[k];
    if (return_argmax) out.argmax[k] = argmax[static_cast<size_t>(r)];
  }
  return out;
}

}  // namespace mgt
