// An independent fp64 GPT forward for the model tests: plain loops, batch-major, one sequence at
// a time, written from the definitions (Megatron's GPT with the local layer spec) rather than
// from the model's code, so that agreement means both follow the definition.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt::model_testing {

using RefParams = std::map<std::string, std::vector<double>>;

struct RefBatch {
  int64_t batch = 0;
  int64_t seq = 0;
  std::vector<int64_t> tokens;     // [b, s]
  std::vector<int64_t> positions;  // [b, s]
  std::vector<int64_t> labels;     // [b, s]
  std::vector<float> loss_mask;    // [b, s]
};

struct RefOutput {
  std::vector<double> logits;  // [b, s, V]
  std::vector<double> losses;  // [b, s]
  double loss = 0.0;           // Σ CE·mask / Σ mask
};

inline RefParams read_params(const GptParameters& params) {
  RefParams out;
  for (const ParameterEntry& e : params.entries()) {
    const std::vector<float> v = params.read_param(e);
    out[e.name] = std::vector<double>(v.begin(), v.end());
  }
  return out;
}

namespace detail {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

inline Matrix linear(const Matrix& x, const std::vector<double>& w, const std::vector<double>* b,
                     int64_t out) {
  const auto in = static_cast<int64_t>(x[0].size());
  Matrix y(x.size(), std::vector<double>(static_cast<size_t>(out), 0.0));
  for (size_t t = 0; t < x.size(); ++t) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b != nullptr ? (*b)[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x[t][static_cast<size_t>(i)] * w[o * in + i];
      y[t][static_cast<size_t>(o)] = acc;
    }
  }
  return y;
}

inline const std::vector<double>* optional(const RefParams& p, const std::string& name) {
  const auto it = p.find(name);
  return it == p.end() ? nullptr : &it->second;
}

inline Matrix norm(const GptConfig& c, const RefParams& p, const std::string& prefix,
                   const Matrix& x) {
  const std::vector<double>& w = p.at(prefix + ".weight");
  const std::vector<double>* b = optional(p, prefix + ".bias");
  Matrix y = x;
  for (size_t t = 0; t < x.size(); ++t) {
    const auto h = static_cast<double>(x[t].size());
    double mean = 0.0;
    if (c.normalization == Normalization::kLayerNorm) {
      for (const double v : x[t]) mean += v;
      mean /= h;
    }
    double sq = 0.0;
    for (const double v : x[t]) sq += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(sq / h + c.norm_epsilon);
    for (size_t i = 0; i < x[t].size(); ++i) {
      y[t][i] = (x[t][i] - mean) * rstd * w[i] + (b != nullptr ? (*b)[i] : 0.0);
    }
  }
  return y;
}

// Rotate-half RoPE on the first rotary_dim channels of a head vector at sequence index pos.
inline void rope(const GptConfig& c, double* x, int64_t pos) {
  const int64_t dim = c.rotary_dim();
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double theta =
        static_cast<double>(pos) *
        std::pow(c.rotary_base, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    const double x1 = x[i];
    const double x2 = x[i + half];
    x[i] = x1 * std::cos(theta) - x2 * std::sin(theta);
    x[i + half] = x2 * std::cos(theta) + x1 * std::sin(theta);
  }
}

inline double activation(Activation a, double x) {
  if (a == Activation::kGelu) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (a == Activation::kSquaredRelu) return x > 0.0 ? x * x : 0.0;
  // Megatron's constants for the tanh form.
  return 0.5 * x * (1.0 + std::tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)));
}

}  // namespace detail

// The forward of one configuration (resolved inside) on fp64 parameters.
inline RefOutput reference_forward(const GptConfig& config, const RefParams& p,
                                   const RefBatch& batch) {
  using detail::Matrix;
  const GptConfig c = config.resolved();
  const int64_t h = c.hidden_size;
  const int64_t n = c.num_attention_heads;
  const int64_t g = c.query_groups();
  const int64_t k = c.kv_channels;
  const int64_t f = c.ffn_hidden_size;
  const int64_t vocab = c.padded_vocab_size;
  const int64_t s = batch.seq;
  const int64_t per_group = n / g;
  const bool bias = c.add_bias_linear;

  RefOutput out;
  out.logits.assign(static_cast<size_t>(batch.batch * s * vocab), 0.0);
  out.losses.assign(static_cast<size_t>(batch.batch * s), 0.0);
  double loss_sum = 0.0;
  double mask_sum = 0.0;

  for (int64_t b = 0; b < batch.batch; ++b) {
    Matrix x(static_cast<size_t>(s), std::vector<double>(static_cast<size_t>(h)));
    for (int64_t t = 0; t < s; ++t) {
      const int64_t tok = batch.tokens[static_cast<size_t>(b * s + t)];
      for (int64_t i = 0; i < h; ++i) {
        double v = p.at("embedding.word_embeddings.weight")[tok * h + i];
        if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
          const int64_t pos = batch.positions[static_cast<size_t>(b * s + t)];
          v += p.at("embedding.position_embeddings.weight")[pos * h + i];
        }
        x[t][i] = v;
      }
    }

    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string pre = "decoder.layers." + std::to_string(l);
      const Matrix ln1 = detail::norm(c, p, pre + ".input_layernorm", x);
      const std::string qkv_name = pre + ".self_attention.linear_qkv";
      const Matrix qkv =
          detail::linear(ln1, p.at(qkv_name + ".weight"),
                         bias ? &p.at(qkv_name + ".bias") : nullptr, (n + 2 * g) * k);
      // Unpack the per-group layout [q_j heads | k_j | v_j] and rotate.
      std::vector<Matrix> q(static_cast<size_t>(n), Matrix(static_cast<size_t>(s)));
      std::vector<Matrix> key(static_cast<size_t>(g), Matrix(static_cast<size_t>(s)));
      std::vector<Matrix> val(static_cast<size_t>(g), Matrix(static_cast<size_t>(s)));
      for (int64_t t = 0; t < s; ++t) {
        for (int64_t j = 0; j < g; ++j) {
          const double* base = qkv[t].data() + j * (per_group + 2) * k;
          for (int64_t m = 0; m < per_group; ++m) {
            q[j * per_group + m][t].assign(base + m * k, base + (m + 1) * k);
          }
          key[j][t].assign(base + per_group * k, base + (per_group + 1) * k);
          val[j][t].assign(base + (per_group + 1) * k, base + (per_group + 2) * k);
        }
        if (c.qk_layernorm) {
          // --qk-layernorm: each head's vector normalised before RoPE.
          for (auto& head : q) head[t] = detail::norm(c, p, pre + ".self_attention.q_layernorm", {head[t]})[0];
          for (auto& head : key) head[t] = detail::norm(c, p, pre + ".self_attention.k_layernorm", {head[t]})[0];
        }
        if (c.position_embedding_type == PositionEmbeddingType::kRope) {
          for (auto& head : q) detail::rope(c, head[t].data(), t);
          for (auto& head : key) detail::rope(c, head[t].data(), t);
        }
      }
      Matrix context(static_cast<size_t>(s), std::vector<double>(static_cast<size_t>(n * k)));
      for (int64_t head = 0; head < n; ++head) {
        const int64_t j = head / per_group;
        for (int64_t t = 0; t < s; ++t) {
          std::vector<double> score(static_cast<size_t>(t + 1));
          double max = -1e300;
          for (int64_t u = 0; u <= t; ++u) {
            double dot = 0.0;
            for (int64_t d = 0; d < k; ++d) dot += q[head][t][d] * key[j][u][d];
            score[u] = dot / std::sqrt(static_cast<double>(k));
            max = std::max(max, score[u]);
          }
          double sum = 0.0;
          for (double& v : score) sum += (v = std::exp(v - max));
          for (int64_t d = 0; d < k; ++d) {
            double acc = 0.0;
            for (int64_t u = 0; u <= t; ++u) acc += score[u] / sum * val[j][u][d];
            context[t][head * k + d] = acc;
          }
        }
      }
      const std::string proj = pre + ".self_attention.linear_proj";
      const Matrix attn = detail::linear(context, p.at(proj + ".weight"),
                                         bias ? &p.at(proj + ".bias") : nullptr, h);
      for (int64_t t = 0; t < s; ++t) {
        for (int64_t i = 0; i < h; ++i) x[t][i] += attn[t][i];
      }

      const Matrix ln2 = detail::norm(c, p, pre + ".pre_mlp_layernorm", x);
      const std::string fc1 = pre + ".mlp.linear_fc1";
      const Matrix up = detail::linear(ln2, p.at(fc1 + ".weight"),
                                       bias ? &p.at(fc1 + ".bias") : nullptr, c.fc1_size());
      Matrix act(static_cast<size_t>(s), std::vector<double>(static_cast<size_t>(f)));
      for (int64_t t = 0; t < s; ++t) {
        for (int64_t i = 0; i < f; ++i) {
          if (c.activation == Activation::kSwiglu) {
            const double gate = up[t][i];
            act[t][i] = gate / (1.0 + std::exp(-gate)) * up[t][f + i];
          } else {
            act[t][i] = detail::activation(c.activation, up[t][i]);
          }
        }
      }
      const std::string fc2 = pre + ".mlp.linear_fc2";
      const Matrix mlp =
          detail::linear(act, p.at(fc2 + ".weight"), bias ? &p.at(fc2 + ".bias") : nullptr, h);
      for (int64_t t = 0; t < s; ++t) {
        for (int64_t i = 0; i < h; ++i) x[t][i] += mlp[t][i];
      }
    }

    const Matrix final_norm = detail::norm(c, p, "decoder.final_layernorm", x);
    const std::string out_name = c.untie_embeddings_and_output_weights
                                     ? "output_layer.weight"
                                     : "embedding.word_embeddings.weight";
    const Matrix logits = detail::linear(final_norm, p.at(out_name), nullptr, vocab);
    for (int64_t t = 0; t < s; ++t) {
      double max = -1e300;
      for (const double v : logits[t]) max = std::max(max, v);
      double sum = 0.0;
      for (const double v : logits[t]) sum += std::exp(v - max);
      const auto row = static_cast<size_t>(b * s + t);
      const int64_t label = batch.labels[row];
      const double ce = max + std::log(sum) - logits[t][label];
      out.losses[row] = ce;
      loss_sum += ce * batch.loss_mask[row];
      mask_sum += batch.loss_mask[row];
      for (int64_t v = 0; v < vocab; ++v) out.logits[row * vocab + v] = logits[t][v];
    }
  }
  out.loss = loss_sum / mask_sum;
  return out;
}

}  // namespace mgt::model_testing
