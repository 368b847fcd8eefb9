// Shared pieces of the model tests: small configurations covering the model's variants,
// reproducible batches, and parameters randomised strongly enough for gradient checks.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "../kernels/kernel_testing.hpp"
#include "model/gpt_config.hpp"
#include "model/gpt_model.hpp"
#include "reference_gpt.hpp"

namespace mgt::model_testing {

// LayerNorm + erf GELU + learned absolute positions + biases + tied output.
inline GptConfig gpt2_like_config() {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.seq_length = 8;
  c.max_position_embeddings = 10;
  c.padded_vocab_size = 32;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  return c;
}

// RMSNorm + SwiGLU + RoPE on half the head + no biases + untied output + grouped-query attention
// with kv_channels != hidden / heads.
inline GptConfig llama_like_config() {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.group_query_attention = true;
  c.num_query_groups = 2;
  c.kv_channels = 8;
  c.ffn_hidden_size = 24;
  c.seq_length = 8;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.rotary_percent = 0.5;
  c.normalization = Normalization::kRmsNorm;
  c.activation = Activation::kSwiglu;
  c.add_bias_linear = false;
  c.untie_embeddings_and_output_weights = true;
  c.padded_vocab_size = 32;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  return c;
}

// --qk-layernorm on a configuration: LayerNorm (weight and bias) or RMSNorm over each query and
// key head.
inline GptConfig with_qk_layernorm(GptConfig c) {
  c.qk_layernorm = true;
  return c;
}

// tanh GELU (--openai-gelu), otherwise like gpt2_like_config but untied and three layers.
inline GptConfig openai_gelu_config() {
  GptConfig c = gpt2_like_config();
  c.num_layers = 3;
  c.activation = Activation::kOpenaiGelu;
  c.untie_embeddings_and_output_weights = true;
  return c;
}

// Random tokens and labels, positions 0…s−1 (shifted by one in the second row when the model
// has room, to exercise position_ids), and a loss mask with a few zeros.
inline RefBatch random_batch(const GptConfig& config, int64_t batch, int64_t seq, uint32_t seed) {
  const GptConfig c = config.resolved();
  std::mt19937 gen(seed);
  RefBatch out;
  out.batch = batch;
  out.seq = seq;
  const int64_t offset_room = c.max_position_embeddings - seq;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      out.tokens.push_back(
          static_cast<int64_t>(gen() % static_cast<uint32_t>(c.padded_vocab_size)));
      out.labels.push_back(
          static_cast<int64_t>(gen() % static_cast<uint32_t>(c.padded_vocab_size)));
      out.positions.push_back(t + (b % 2 == 1 && offset_room > 0 ? 1 : 0));
      out.loss_mask.push_back((b * seq + t) % 5 == 3 ? 0.0f : 1.0f);
    }
  }
  return out;
}

inline MicroBatch micro_batch(const RefBatch& batch) {
  MicroBatch m;
  m.batch_size = batch.batch;
  m.seq_length = batch.seq;
  m.tokens = batch.tokens;
  m.position_ids = batch.positions;
  m.labels = batch.labels;
  m.loss_mask = batch.loss_mask;
  return m;
}

// Replaces the tiny initial values with large random ones (weights and biases uniform in
// ±0.9, norm weights in [0.5, 1.5)), so that every path carries a strong signal.
inline void randomize_parameters(GptParameters& params, uint32_t seed) {
  uint32_t s = seed;
  for (const ParameterEntry& e : params.entries()) {
    const bool norm_weight = e.name.find("layernorm.weight") != std::string::npos;
    const std::vector<float> values =
        norm_weight
            ? kernel_testing::random_floats(static_cast<size_t>(e.numel()), ++s, 0.5f, 1.5f)
            : kernel_testing::random_floats(static_cast<size_t>(e.numel()), ++s, -0.9f, 0.9f);
    params.write_param(e, values);
  }
}

// The whole gradient buffer on the host.
inline std::vector<float> read_all_grads(const GptParameters& params) {
  std::vector<float> out(static_cast<size_t>(params.grads().size()));
  params.backend().copy_to_host(params.grads(), out);
  return out;
}

}  // namespace mgt::model_testing
