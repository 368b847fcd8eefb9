#include "model/activation_memory.hpp"

#include <optional>

#include "core/checked_size.hpp"
#include "core/error.hpp"
#include "model/mlp.hpp"
#include "model/norm_fp8_cast.hpp"
#include "model/recompute_plan.hpp"

namespace mgt {

namespace {

// The elements of a dense MLP's activation output ([s, b, ffn] = `elements`), none where no layer
// writes it (the GELU taken into fc2's FP8 casts in every layer: model/mlp.hpp).
template <typename Count>
Count mlp_activation_output(const GptConfig& c, Count elements) {
  const bool every_layer_fp8 = c.fp8 && c.fp8->bf16_layers_at_start == 0 && c.fp8->bf16_layers_at_end == 0;
  return every_layer_fp8 && fp8_mlp_gelu_in_fc2_casts(c.activation, &*c.fp8) ? Count(0) : elements;
}


using N = SaturatingSize;

// The activations that selective recomputation (recompute_plan.hpp) keeps in one buffer shared by
// all layers instead of in each layer's set.
struct SharedActivations {
  bool core_attention = false;  // context and softmax statistics (core_attn)
  bool norm_outputs = false;    // the input and pre-MLP norm outputs (layernorm)
  bool mlp = false;             // fc1 and activation outputs (mlp)
  bool moe_activation = false;  // the MoE experts' activation output (moe_act)
  bool moe = false;             // every MoE layer activation (moe)
};

SharedActivations shared_activations(const GptConfig& c, bool training) {
  return {recomputes_core_attention(c, training), recomputes_layernorm(c, training), recomputes_mlp(c, training),
          recomputes_moe_act(c, training), recomputes_moe(c, training)};
}

// What one layer's LayerActivations take (ActivationMemory's take_layer_set): all floats, and of
// them the fp32 ones (norm and softmax statistics).
struct LayerSetFloats {
  N floats;
  N fp32;
};

LayerSetFloats layer_set_floats(const GptConfig& c, int64_t tp_size, int64_t seq, int64_t batch,
                                bool sequence_parallel, const SharedActivations& shared) {
  const N t = N(seq) * batch;
  const N tl = sequence_parallel ? N(seq / tp_size) * batch : t;
  const N h = c.hidden_size;
  const N k = c.kv_channels;
  const N heads = c.num_attention_heads / tp_size;
  const N groups = c.query_groups() / tp_size;
  const N norm_stats = c.normalization == Normalization::kLayerNorm ? 2 : 1;
  N fp32 = norm_stats * tl * 2;  // the two norms' statistics
  N floats = tl * h + fp32 + t * heads * k + t * groups * k * 2;  // residual, statistics, query, key, value
  if (c.qk_layernorm) {
    // The query and key before their norms, and the norms' statistics (a row per head and token).
    const N head_rows = t * (heads + groups);
    floats += head_rows * k + norm_stats * head_rows;
    fp32 += norm_stats * head_rows;
  }
  if (!shared.norm_outputs) {
    // The input and pre-MLP norm outputs (whole), those no norm casts to FP8 instead.
    const NormFp8Casts cast = model_norm_fp8_casts(c, sequence_parallel);
    floats += t * h * (N(cast.input_norm ? 0 : 1) + (cast.pre_mlp_norm ? 0 : 1));
  }
  if (!shared.mlp) floats += t * (c.fc1_size() / tp_size) + mlp_activation_output(c, t * (c.ffn_hidden_size / tp_size));
  if (!shared.core_attention) {
    const N lse = N(batch) * heads * seq;  // softmax statistics
    floats += t * heads * k + lse;         // context
    fp32 += lse;
  }
  return {floats, fp32};
}

// The fp32 floats of an MoE layer's activations and of the MoE scratch (model/moe_buffers.cpp:
// router logits, probabilities, routing map, auxiliary counts, row weights; gates and their
// gradients).
N moe_activation_fp32(const MoeBufferSizes& s) {
  return N(s.tokens) * s.experts * 3 + N(s.aux_groups) * s.experts + s.max_rows;
}
N moe_scratch_fp32(const MoeBufferSizes& s) { return N(s.tokens) * s.experts * 3 + s.max_rows; }

}  // namespace

ActivationElements ActivationMemory::recompute_scratch_elements(const GptConfig& config, int64_t tp_size,
                                                                int64_t seq, int64_t batch, bool sequence_parallel) {
  const GptConfig c = config.resolved();
  const RecomputePlan plan(c, c.num_layers, true);
  const N tl = sequence_parallel ? N(seq / tp_size) * batch : N(seq) * batch;
  const LayerSetFloats set = layer_set_floats(c, tp_size, seq, batch, sequence_parallel, shared_activations(c, true));
  const N floats = N(plan.scratch_inputs()) * tl * c.hidden_size + N(plan.scratch_activation_sets()) * set.floats;
  return {floats.value(), (N(plan.scratch_activation_sets()) * set.fp32).value(), 0};
}

int64_t ActivationElements::bytes() const {
  return (SaturatingSize(floats) * 4 + SaturatingSize(indices) * 8).value();
}

int64_t ActivationElements::bytes(int64_t bytes_per_activation) const {
  // A saturated count has no known split: every float at 4 bytes, still saturated.
  if (SaturatingSize(floats).saturated() || fp32_floats > floats) return bytes();
  return (SaturatingSize(floats - fp32_floats) * bytes_per_activation + SaturatingSize(fp32_floats) * 4 +
          SaturatingSize(indices) * 8)
      .value();
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
  const SharedActivations shared = shared_activations(c, training);

  N floats = t;      // loss_mask
  N fp32 = t;
  N indices = t * 3; // tokens, positions, labels
  // Layer inputs (kept, and the shared inputs inside a checkpointed group) and the output.
  floats += training ? (N(plan.layers_keeping_input()) + plan.scratch_inputs() + 1) * tl * h : tl * h * 2;
  const N context = t * heads * k;
  const N lse = N(batch) * heads * seq;
  if (shared.core_attention) {
    floats += context + lse;
    fp32 += lse;
  }
  if (shared.norm_outputs) floats += t * h * 2;
  if (shared.mlp) floats += t * fc1 + mlp_activation_output(c, t * ffn);
  const N sets = training ? N(plan.layers_keeping_activations()) + plan.scratch_activation_sets() : N(1);
  const LayerSetFloats set = layer_set_floats(c, tp_size, seq, batch, sequence_parallel, shared);
  floats += sets * set.floats;
  fp32 += sets * set.fp32;
  floats += t * (heads + N(2) * groups) * k + tl * h * 2;  // scratch: mixed QKV, two hidden buffers
  if (sequence_parallel) floats += t * h * 3;               // the whole-sequence buffers
  if (training) floats += context * 2 + t * groups * k * 2 + t * ffn + t * fc1 + tl * h;
  if (training && c.qk_layernorm) floats += t * (heads + groups) * k;  // the gradients before the q/k norms
  if (c.moe.enabled()) {
    // MoE layers (model/moe_buffers.hpp) keep their buffers beside the dense MLP's: each MoE
    // layer in training (full recomputation, whose shared sets would hold them, is refused with
    // MoE), one shared set in evaluation and under --recompute-modules moe.
    const MoeBufferSizes moe = moe_buffer_sizes(c, seq, batch);
    const N moe_sets = training && !shared.moe ? N(c.moe.num_moe_layers()) : N(1);
    if (shared.moe_activation && moe_sets.value() > 0) {
      // moe_act: one experts' activation output instead of each MoE layer's.
      const int64_t activation_output = moe.expert_rows * moe.ffn;
      floats += moe_sets * (moe.activation_floats() - activation_output) + N(activation_output);
    } else {
      floats += moe_sets * moe.activation_floats();
    }
    floats += N(moe.scratch_floats());
    fp32 += moe_sets * moe_activation_fp32(moe) + moe_scratch_fp32(moe);
    indices += moe_sets * moe.activation_indices();
  }
  if (!with_output) return {floats.value(), fp32.value(), indices.value()};
  if (training) {
    floats += t;  // loss gradient
    fp32 += t;
  }
  floats += tl * h + norm_stats * tl;  // final norm
  fp32 += norm_stats * tl;
  const N rows = last_position_logits ? N(batch) : t;
  floats += (logits_rows > 0 && N(logits_rows).value() < rows.value() ? N(logits_rows) : rows) * vocab;
  if (!training) indices += t * 3;  // predictions, selected rows and labels
  N statistics = t * 3;             // losses, row max, sum of exponentials
  if (tp_size > 1) statistics += t * 3 * tp_size;  // the ranks' vocabulary-slice statistics
  floats += statistics;
  fp32 += statistics;
  return {floats.value(), fp32.value(), indices.value()};
}

ActivationElements ActivationMemory::allocated() const {
  ActivationElements e;
  for (const DeviceBuffer& b : owned_) e.floats += b.size();
  e.fp32_floats = fp32_taken_;
  if (owns_recompute_scratch_) {
    for (const DeviceBuffer& b : recompute_scratch_->owned) e.floats += b.size();
    e.fp32_floats += recompute_scratch_->fp32_floats;
  }
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
  const SharedActivations shared = shared_activations(c, training);

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
  if (shared.core_attention) {
    shared_context = take(t * heads * k);
    shared_lse = take_fp32(batch * heads * seq);
  }
  FloatView shared_input_norm_output;
  FloatView shared_pre_mlp_norm_output;
  if (shared.norm_outputs) {
    shared_input_norm_output = sequence_parallel ? take_shareable(t * h) : take(t * h);
    shared_pre_mlp_norm_output = sequence_parallel ? take_shareable(t * h) : take(t * h);
  }
  FloatView shared_moe_activation;
  if (shared.moe_activation && !shared.moe && c.moe.num_moe_layers() > 0) {
    const MoeBufferSizes moe = moe_buffer_sizes(c, seq, batch);
    shared_moe_activation = take(moe.expert_rows * moe.ffn);
  }
  MlpActivations shared_mlp;
  if (shared.mlp) {
    shared_mlp.fc1_output = take(t * fc1);
    shared_mlp.activation_output = take(mlp_activation_output(c, t * ffn));
  }
  // One MoE layer's activations (moe_act's shared activation output in them).
  const auto take_moe_set = [&] {
    return take_moe_activations(moe_buffer_sizes(c, seq, batch), [&](int64_t n) { return take(n); },
                                [&](int64_t n) { return take_fp32(n); }, [&](int64_t n) { return take_index(n); },
                                shared_moe_activation);
  };
  // --recompute-modules moe: one set for all MoE layers.
  std::optional<MoeActivations> shared_moe;
  if (shared.moe && c.moe.num_moe_layers() > 0) shared_moe = take_moe_set();
  // The norm outputs that the norms cast to FP8 instead of writing them: none.
  const NormFp8Casts norm_casts = model_norm_fp8_casts(c, sequence_parallel);
  // with_moe: the buffers of a mixture-of-experts layer too.
  const auto take_layer_set = [&](bool with_moe) {
    LayerActivations a;
    // Whole under sequence parallelism: the all-gathered inputs of linear_qkv and linear_fc1,
    // kept for their weight gradients (transformer_layer.hpp).
    if (!norm_casts.input_norm)
      a.input_norm_output =
          shared.norm_outputs ? shared_input_norm_output : sequence_parallel ? take_shareable(t * h) : take(t * h);
    a.input_norm = take_norm_stats(layer_norm, tl);
    // One block: the split query, key and value, or the unsplit projection (self_attention.hpp).
    a.attention.mixed = take(t * (heads + 2 * groups) * k);
    a.attention.query = a.attention.mixed.first(t * heads * k);
    a.attention.key = a.attention.mixed.subspan(t * heads * k, t * groups * k);
    a.attention.value = a.attention.mixed.subspan(t * (heads + groups) * k, t * groups * k);
    if (c.qk_layernorm) {
      a.attention.query_input = take(t * heads * k);
      a.attention.key_input = take(t * groups * k);
      a.attention.query_norm = take_norm_stats(layer_norm, t * heads);
      a.attention.key_norm = take_norm_stats(layer_norm, t * groups);
    }
    if (shared.core_attention) {
      a.attention.context = shared_context;
      a.attention.lse = shared_lse;
    } else {
      a.attention.context = take(t * heads * k);
      a.attention.lse = take_fp32(batch * heads * seq);
    }
    a.residual = take(tl * h);
    if (!norm_casts.pre_mlp_norm)
      a.pre_mlp_norm_output =
          shared.norm_outputs ? shared_pre_mlp_norm_output : sequence_parallel ? take_shareable(t * h) : take(t * h);
    a.pre_mlp_norm = take_norm_stats(layer_norm, tl);
    if (shared.mlp) {
      a.mlp = shared_mlp;
    } else {
      a.mlp.fc1_output = take(t * fc1);
      a.mlp.activation_output = take(mlp_activation_output(c, t * ffn));
    }
    if (with_moe) a.moe = shared_moe ? *shared_moe : take_moe_set();
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
    if (c.qk_layernorm) {
      scratch.attention.d_query_input = take(t * heads * k);
      scratch.attention.d_key_input = take(t * groups * k);
    }
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
  (sink_ == &owned_ ? fp32_taken_ : recompute_scratch_->fp32_floats) += n;
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
