#include "model/activation_memory.hpp"

namespace mgt {

ActivationMemory::ActivationMemory(Backend& backend, const GptConfig& config,
                                   const TensorParallelRank& tp, int64_t seq, int64_t batch,
                                   bool training, bool last_position_logits)
    : seq_(seq), batch_(batch), training_(training), backend_(&backend) {
  const GptConfig c = config.resolved();
  const int64_t t = seq * batch;
  const int64_t h = c.hidden_size;
  const int64_t k = c.kv_channels;
  const int64_t heads = c.num_attention_heads / tp.size;
  const int64_t groups = c.query_groups() / tp.size;
  const int64_t ffn = c.ffn_hidden_size / tp.size;
  const int64_t fc1 = c.fc1_size() / tp.size;
  const int64_t vocab = c.padded_vocab_size / tp.size;
  const bool layer_norm = c.normalization == Normalization::kLayerNorm;
  const RecomputeGranularity recompute =
      training ? c.recompute_granularity : RecomputeGranularity::kFull;

  tokens = take_index(t);
  positions = take_index(t);
  labels = take_index(t);
  loss_mask = take(t);

  // Layer inputs: all kept for a backward, two alternating buffers otherwise.
  if (training) {
    for (int64_t l = 0; l <= c.num_layers; ++l) hidden_.push_back(take(t * h));
  } else {
    const FloatView even = take(t * h);
    const FloatView odd = take(t * h);
    for (int64_t l = 0; l <= c.num_layers; ++l) hidden_.push_back(l % 2 == 0 ? even : odd);
  }

  FloatView shared_context;
  FloatView shared_lse;
  if (recompute == RecomputeGranularity::kSelective) {
    shared_context = take(t * heads * k);
    shared_lse = take(batch * heads * seq);
  }
  const int64_t sets = recompute == RecomputeGranularity::kFull ? 1 : c.num_layers;
  for (int64_t l = 0; l < sets; ++l) {
    LayerActivations a;
    a.input_norm_output = take(t * h);
    a.input_norm = take_norm_stats(layer_norm, t);
    a.attention.query = take(t * heads * k);
    a.attention.key = take(t * groups * k);
    a.attention.value = take(t * groups * k);
    if (recompute == RecomputeGranularity::kSelective) {
      a.attention.context = shared_context;
      a.attention.lse = shared_lse;
    } else {
      a.attention.context = take(t * heads * k);
      a.attention.lse = take(batch * heads * seq);
    }
    a.residual = take(t * h);
    a.pre_mlp_norm_output = take(t * h);
    a.pre_mlp_norm = take_norm_stats(layer_norm, t);
    a.mlp.fc1_output = take(t * fc1);
    a.mlp.activation_output = take(t * ffn);
    layers_.push_back(a);
  }

  scratch.attention.mixed = take(t * (heads + 2 * groups) * k);
  scratch.hidden_a = take(t * h);
  scratch.hidden_b = take(t * h);
  if (training) {
    scratch.attention.d_context = take(t * heads * k);
    scratch.attention.d_query = take(t * heads * k);
    scratch.attention.d_key = take(t * groups * k);
    scratch.attention.d_value = take(t * groups * k);
    scratch.mlp.d_activation = take(t * ffn);
    scratch.mlp.d_fc1 = take(t * fc1);
    d_hidden = take(t * h);
    loss.d_loss = take(t);
  }

  final_norm_output = take(t * h);
  final_norm = take_norm_stats(layer_norm, t);
  logits = take((last_position_logits ? batch : t) * vocab);
  if (!training) {
    predictions = take_index(t);
    selected_rows = take_index(t);
    selected_labels = take_index(t);
  }
  loss.losses = take(t);
  loss.row_max = take(t);
  loss.sum_exp = take(t);
}

FloatView ActivationMemory::take(int64_t n) {
  owned_.emplace_back(*backend_, n);
  return owned_.back().view();
}

IndexView ActivationMemory::take_index(int64_t n) {
  owned_index_.emplace_back(*backend_, n);
  return owned_index_.back().view();
}

NormStats ActivationMemory::take_norm_stats(bool with_mean, int64_t rows) {
  NormStats stats;
  if (with_mean) stats.mean = take(rows);
  stats.rstd = take(rows);
  return stats;
}

}  // namespace mgt
