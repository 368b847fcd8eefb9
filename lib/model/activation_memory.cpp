#include "model/activation_memory.hpp"

#include "core/checked_size.hpp"
#include "core/error.hpp"
#include "model/recompute_plan.hpp"

namespace mgt {

namespace {

using N = SaturatingSize;

// What one layer's LayerActivations take (ActivationMemory's take_layer_set).
N layer_set_floats(const GptConfig& c, int64_t tp_size, int64_t seq, int64_t batch, bool sequence_parallel,
                   bool shared_core_attention) {
  const N t = N(seq) * batch;
  const N tl = sequence_parallel ? N(seq / tp_size) * batch : t;
  const N h = c.hidden_size;
  const N k = c.kv_channels;
  const N heads = c.num_attention_heads / tp_size;
  const N groups = c.query_groups() / tp_size;
  const N norm_stats = c.normalization == Normalization::kLayerNorm ? 2 : 1;
  N floats = t * h * 2 + tl * h              // input and pre-MLP norm outputs (whole), residual
             + norm_stats * tl * 2           // the two norms' statistics
             + t * heads * k + t * groups * k * 2  // query, key, value
             + t * (c.fc1_size() / tp_size) + t * (c.ffn_hidden_size / tp_size);  // fc1, activation outputs
  if (!shared_core_attention) floats += t * heads * k + N(batch) * heads * seq;  // context, softmax statistics
  return floats;
}

}  // namespace

ActivationElements ActivationMemory::recompute_scratch_elements(const GptConfig& config, int64_t tp_size,
                                                                int64_t seq, int64_t batch, bool sequence_parallel) {
  const GptConfig c = config.resolved();
  const RecomputePlan plan(c, c.num_layers, true);
  const N tl = sequence_parallel ? N(seq / tp_size) * batch : N(seq) * batch;
  const N floats = N(plan.scratch_inputs()) * tl * c.hidden_size +
                   N(plan.scratch_activation_sets()) *
                       layer_set_floats(c, tp_size, seq, batch, sequence_parallel, recomputes_core_attention(c, true));
  return {floats.value(), 0};
}

int64_t ActivationElements::bytes() const {
  return (SaturatingSize(floats) * 4 + SaturatingSize(indices) * 8).value();
}

ActivationElements ActivationMemory::elements(const GptConfig& config, int64_t tp_size, int64_t seq, int64_t batch,
                                              bool training, bool last_position_logits,
                                              bool sequence_parallel, bool with_output, int64_t logits_rows) {
  const GptConfig c = config.resolved();
  const N t = N(seq) * batch;
  const N tl = sequence_parallel ? N(seq / tp_size) * batch : t;  // sequence-parallel tokens
  const N h = c.hidden_size;
  const N k = c.kv_channels;
  const N heads = c.num_attention_heads / tp_size;
  const N groups = c.query_groups() / tp_size;
  const N ffn = c.ffn_hidden_size / tp_size;
  const N fc1 = c.fc1_size() / tp_size;
  const N vocab = c.padded_vocab_size / tp_size;
  const N norm_stats = c.normalization == Normalization::kLayerNorm ? 2 : 1;
  const RecomputePlan plan(c, c.num_layers, training);
  const bool shared_core_attention = recomputes_core_attention(c, training);

  N floats = t;      // loss_mask
  N indices = t * 3; // tokens, positions, labels
  // Layer inputs (kept, and the shared inputs inside a checkpointed group) and the output.
  floats += training ? (N(plan.layers_keeping_input()) + plan.scratch_inputs() + 1) * tl * h : tl * h * 2;
  const N context = t * heads * k;
  const N lse = N(batch) * heads * seq;
  if (shared_core_attention) floats += context + lse;
  const N sets = training ? N(plan.layers_keeping_activations()) + plan.scratch_activation_sets() : N(1);
  floats += sets * layer_set_floats(c, tp_size, seq, batch, sequence_parallel, shared_core_attention);
  floats += t * (heads + N(2) * groups) * k + tl * h * 2;  // scratch: mixed QKV, two hidden buffers
  if (sequence_parallel) floats += t * h * 3;               // the whole-sequence buffers
  if (training) floats += context * 2 + t * groups * k * 2 + t * ffn + t * fc1 + tl * h;
  if (c.moe.enabled()) {
    // MoE layers (model/moe_buffers.hpp) keep their buffers beside the dense MLP's: each MoE
    // layer in training (full recomputation, whose shared sets would hold them, is refused with
    // MoE), one shared set in evaluation.
    const MoeBufferSizes moe = moe_buffer_sizes(c, seq, batch);
    const N moe_sets = training ? N(c.moe.num_moe_layers()) : N(1);
    floats += moe_sets * moe.activation_floats() + N(moe.scratch_floats());
    indices += moe_sets * moe.activation_indices();
  }
  if (!with_output) return {floats.value(), indices.value()};
  if (training) floats += t;           // loss gradient
  floats += tl * h + norm_stats * tl;  // final norm
  const N rows = last_position_logits ? N(batch) : t;
  floats += (logits_rows > 0 && N(logits_rows).value() < rows.value() ? N(logits_rows) : rows) * vocab;
  if (!training) indices += t * 3;  // predictions, selected rows and labels
  floats += t * 3;                  // losses, row max, sum of exponentials
  if (tp_size > 1) floats += t * 3 * tp_size;  // the ranks' vocabulary-slice statistics
  return {floats.value(), indices.value()};
}

ActivationElements ActivationMemory::allocated() const {
  ActivationElements e;
  for (const DeviceBuffer& b : owned_) e.floats += b.size();
  if (owns_recompute_scratch_)
    for (const DeviceBuffer& b : recompute_scratch_->owned) e.floats += b.size();
  for (const DeviceIndexBuffer& b : owned_index_) e.indices += b.size();
  return e;
}

ActivationMemory::ActivationMemory(Backend& backend, const GptConfig& config,
                                   const TensorParallelRank& tp, int64_t seq, int64_t batch,
                                   bool training, bool last_position_logits,
                                   bool sequence_parallel, bool with_output, int64_t logits_rows,
                                   std::shared_ptr<RecomputeScratch> share_scratch)
    : seq_(seq),
      batch_(batch),
      training_(training),
      sequence_parallel_(sequence_parallel),
      backend_(&backend) {
  const GptConfig c = config.resolved();
  if (sequence_parallel && (tp.size < 2 || seq % tp.size != 0)) {
    throw UsageError("--sequence-parallel: the sequence length (" + std::to_string(seq) +
                     ") must be divisible by --tensor-model-parallel-size (" +
                     std::to_string(tp.size) + ")");
  }
  const int64_t t = seq * batch;
  const int64_t tl = sequence_parallel ? seq / tp.size * batch : t;  // sequence-parallel tokens
  const int64_t h = c.hidden_size;
  const int64_t k = c.kv_channels;
  const int64_t heads = c.num_attention_heads / tp.size;
  const int64_t groups = c.query_groups() / tp.size;
  const int64_t ffn = c.ffn_hidden_size / tp.size;
  const int64_t fc1 = c.fc1_size() / tp.size;
  const int64_t vocab = c.padded_vocab_size / tp.size;
  const bool layer_norm = c.normalization == Normalization::kLayerNorm;
  const RecomputePlan plan(c, c.num_layers, training);
  const bool shared_core_attention = recomputes_core_attention(c, training);

  tokens = take_index(t);
  positions = take_index(t);
  labels = take_index(t);
  loss_mask = take_fp32(t);

  // Layer inputs: for a backward the kept ones (recompute_plan.hpp) and the output, the inputs
  // inside a checkpointed group shared by all groups; two alternating buffers otherwise.
  if (training && plan.any_checkpointed()) {
    if (share_scratch && share_scratch->seq == seq && share_scratch->batch == batch) {
      recompute_scratch_ = std::move(share_scratch);
    } else {
      recompute_scratch_ = std::make_shared<RecomputeScratch>();
      recompute_scratch_->seq = seq;
      recompute_scratch_->batch = batch;
      owns_recompute_scratch_ = true;
    }
  }
  // The recompute scratch's buffers go to recompute_scratch_->owned (allocated only if this
  // memory owns it).
  const auto scratch_buffers = [&](auto allocate) {
    if (!owns_recompute_scratch_) return;
    sink_ = &recompute_scratch_->owned;
    allocate();
    sink_ = &owned_;
  };
  if (training) {
    scratch_buffers([&] {
      for (int64_t i = 0; i < plan.scratch_inputs(); ++i) recompute_scratch_->inputs.push_back(take(tl * h));
    });
    for (int64_t l = 0; l < c.num_layers; ++l) {
      hidden_.push_back(plan.keeps_input(l)
                            ? take(tl * h)
                            : recompute_scratch_->inputs[static_cast<size_t>(l - plan.group_of(l).first - 1)]);
    }
    hidden_.push_back(take(tl * h));
  } else {
    const FloatView even = take(tl * h);
    const FloatView odd = take(tl * h);
    for (int64_t l = 0; l <= c.num_layers; ++l) hidden_.push_back(l % 2 == 0 ? even : odd);
  }

  FloatView shared_context;
  FloatView shared_lse;
  if (shared_core_attention) {
    shared_context = take(t * heads * k);
    shared_lse = take_fp32(batch * heads * seq);
  }
  // with_moe: the buffers of a mixture-of-experts layer too.
  const auto take_layer_set = [&](bool with_moe) {
    LayerActivations a;
    // Whole under sequence parallelism: the all-gathered inputs of linear_qkv and linear_fc1,
    // kept for their weight gradients (transformer_layer.hpp).
    a.input_norm_output = sequence_parallel ? take_shareable(t * h) : take(t * h);
    a.input_norm = take_norm_stats(layer_norm, tl);
    // One block: the split query, key and value, or the unsplit projection (self_attention.hpp).
    a.attention.mixed = take(t * (heads + 2 * groups) * k);
    a.attention.query = a.attention.mixed.first(t * heads * k);
    a.attention.key = a.attention.mixed.subspan(t * heads * k, t * groups * k);
    a.attention.value = a.attention.mixed.subspan(t * (heads + groups) * k, t * groups * k);
    if (shared_core_attention) {
      a.attention.context = shared_context;
      a.attention.lse = shared_lse;
    } else {
      a.attention.context = take(t * heads * k);
      a.attention.lse = take_fp32(batch * heads * seq);
    }
    a.residual = take(tl * h);
    a.pre_mlp_norm_output = sequence_parallel ? take_shareable(t * h) : take(t * h);
    a.pre_mlp_norm = take_norm_stats(layer_norm, tl);
    a.mlp.fc1_output = take(t * fc1);
    a.mlp.activation_output = take(t * ffn);
    if (with_moe)
      a.moe = take_moe_activations(moe_buffer_sizes(c, seq, batch), [&](int64_t n) { return take(n); },
                                   [&](int64_t n) { return take_fp32(n); }, [&](int64_t n) { return take_index(n); });
    return a;
  };
  // Activations: each layer's own, but one set shared by all layers in evaluation, and the sets
  // of checkpointed groups shared by all such groups (refilled by the recomputation).
  if (training) {
    scratch_buffers([&] {
      for (int64_t i = 0; i < plan.scratch_activation_sets(); ++i) recompute_scratch_->sets.push_back(take_layer_set(c.moe.enabled()));
    });
    layers_.resize(static_cast<size_t>(c.num_layers));
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (!plan.checkpointed(l)) layers_[static_cast<size_t>(l)] = take_layer_set(c.moe.is_moe_layer(l));
    }
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (!plan.checkpointed(l)) continue;
      layers_[static_cast<size_t>(l)] = plan.activation_lender() >= 0
                                            ? layers_[static_cast<size_t>(plan.activation_lender())]
                                            : recompute_scratch_->sets[static_cast<size_t>(l - plan.group_of(l).first)];
    }
  } else {
    layers_.assign(static_cast<size_t>(c.num_layers), take_layer_set(c.moe.enabled()));
  }

  scratch.attention.mixed = take(t * (heads + 2 * groups) * k);
  scratch.hidden_a = take(tl * h);
  scratch.hidden_b = take(tl * h);
  if (c.moe.enabled()) {
    // Training or not, the full training scratch: elements() counts it so.
    scratch.moe = take_moe_scratch(moe_buffer_sizes(c, seq, batch), [&](int64_t n) { return take(n); },
                                   [&](int64_t n) { return take_fp32(n); }, true);
  }
  if (sequence_parallel) {
    sequence.gathered = take_shareable(t * h);
    sequence.whole = take_shareable(t * h);
    sequence.input_grad = take_shareable(t * h);
    scratch.attention.sequence = sequence;
    scratch.mlp.sequence = sequence;
  }
  if (training) {
    scratch.attention.d_context = take(t * heads * k);
    scratch.attention.d_query = take(t * heads * k);
    scratch.attention.d_key = take(t * groups * k);
    scratch.attention.d_value = take(t * groups * k);
    scratch.mlp.d_activation = take(t * ffn);
    scratch.mlp.d_fc1 = take(t * fc1);
    d_hidden = take(tl * h);
  }
  if (!with_output) return;
  if (training) loss.d_loss = take_fp32(t);

  final_norm_output = take(tl * h);
  final_norm = take_norm_stats(layer_norm, tl);
  const int64_t rows = last_position_logits ? batch : t;
  logits = take((logits_rows > 0 && logits_rows < rows ? logits_rows : rows) * vocab);
  if (!training) {
    predictions = take_index(t);
    selected_rows = take_index(t);
    selected_labels = take_index(t);
  }
  loss.losses = take_fp32(t);
  loss.row_max = take_fp32(t);
  loss.sum_exp = take_fp32(t);
  if (tp.size > 1) loss.shard_statistics = take_fp32(tp.size * 3 * t);
}

FloatView ActivationMemory::take(int64_t n) {
  sink_->emplace_back(*backend_, n, backend_->activation_type());
  return sink_->back().view();
}

FloatView ActivationMemory::take_shareable(int64_t n) {
  sink_->emplace_back(*backend_, n, backend_->activation_type(), MemorySharing::kShareable);
  shareable_.push_back(sink_->back().view());
  return shareable_.back();
}

FloatView ActivationMemory::take_fp32(int64_t n) {
  sink_->emplace_back(*backend_, n, FloatType::kF32);
  return sink_->back().view();
}

IndexView ActivationMemory::take_index(int64_t n) {
  owned_index_.emplace_back(*backend_, n);
  return owned_index_.back().view();
}

NormStats ActivationMemory::take_norm_stats(bool with_mean, int64_t rows) {
  NormStats stats;
  if (with_mean) stats.mean = take_fp32(rows);
  stats.rstd = take_fp32(rows);
  return stats;
}

}  // namespace mgt
