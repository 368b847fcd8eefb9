// An MoE layer computing in FP8 (model/moe_layer.hpp with an Fp8Training), trained for a few
// passes on fixed inputs, and the same computation done independently: each expert's routed
// rows, unpadded, through FP8 linear layers of its own (ExpertMlp over exactly those rows), the
// outputs weighted and summed on the host. Shared by the CPU test (tests/model/test_moe_fp8.cpp)
// and the GPU one (tests/cuda/test_cuda_moe_fp8.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_parameters.hpp"
#include "model/moe_buffers.hpp"
#include "model/moe_experts.hpp"
#include "model/moe_layer.hpp"

namespace mgt::moe_fp8_testing {

constexpr const char* kMlp = "decoder.layers.0.mlp";
// "decoder.layers.0.mlp" + suffix (appended: GCC 12 warns wrongly of operator+ on a temporary).
inline std::string mlp_name(const std::string& suffix) {
  std::string name = kMlp;
  name.append(suffix);
  return name;
}
inline std::string expert_name(int64_t e) {
  std::string name = mlp_name(".experts.local_experts.");
  name.append(std::to_string(e));
  return name;
}
// The expert that no token chooses (its router row points away from every input).
constexpr int64_t kIdleExpert = 3;

// One MoE layer of 4 experts (top-2, SwiGLU) and a shared expert, sizes whole multiples of 16 so
// that a GPU runs cuBLASLt's FP8 GEMMs, with --fp8-format hybrid and delayed scaling.
inline GptConfig fp8_moe_config() {
  GptConfig c;
  c.num_layers = 1;
  c.hidden_size = 32;
  c.num_attention_heads = 2;
  c.seq_length = 23;
  c.padded_vocab_size = 16;
  c.add_bias_linear = false;
  c.activation = Activation::kSwiglu;
  c.ffn_hidden_size = 32;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  c.moe.num_experts = 4;
  c.moe.layer_pattern = {true};
  c.moe.ffn_hidden_size = 32;
  c.moe.topk = 2;
  c.moe.shared_expert_intermediate_size = 32;
  c.moe.aux_loss_coeff = 0.01;
  Fp8Recipe recipe;
  recipe.backward_format = Fp8Format::kE5M2;  // hybrid
  recipe.amax_history_len = 4;
  recipe.amax_compute_algo = Fp8AmaxAlgo::kMax;
  c.fp8 = recipe;
  return c.resolved();
}

inline std::vector<float> normal_values(std::mt19937& rng, std::size_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Parameters from a fixed seed, the same on every backend; the router's row of kIdleExpert
// negative, so that it loses to every other expert on the (positive) inputs.
inline void set_parameters(GptParameters& params) {
  std::mt19937 rng(5);
  for (const ParameterEntry& e : params.entries()) {
    std::vector<float> values = normal_values(rng, static_cast<std::size_t>(e.numel()), 0.3f);
    if (e.name == mlp_name(".router.weight")) {
      const int64_t h = e.local_shape.at(1);
      for (int64_t i = 0; i < h; ++i) values[static_cast<std::size_t>(kIdleExpert * h + i)] = -5.0f;
    }
    params.write_param(e, values);
  }
}

struct Inputs {
  std::vector<float> input;     // [T, h], positive
  std::vector<float> d_output;  // [T, h]
};

inline Inputs make_inputs(const GptConfig& c, int64_t tokens) {
  std::mt19937 rng(9);
  const std::size_t n = static_cast<std::size_t>(tokens * c.hidden_size);
  Inputs in;
  in.input = normal_values(rng, n, 1.0f);
  for (float& x : in.input) x = std::fabs(x) + 0.1f;
  in.d_output = normal_values(rng, n, 1.0f);
  return in;
}

// What a run leaves: the last pass's output, the routing it used, the parameters' gradients
// (summed over the passes) and the FP8 state after the passes.
struct Result {
  std::vector<float> output;
  std::vector<float> routing_map;
  std::vector<float> probs;
  std::vector<float> grads;  // every parameter's, in the table's order (the router's included)
  std::vector<float> forward_history;
  std::vector<float> forward_scale;
  std::vector<float> backward_history;
  std::vector<float> backward_scale;
};

inline std::vector<float> read(Backend& backend, ConstFloatView v) {
  std::vector<float> host(static_cast<std::size_t>(v.size()));
  backend.copy_to_host(v, std::span<float>(host));
  return host;
}

inline void read_state(Backend& backend, Fp8Training& fp8, Result& r) {
  r.forward_history = read(backend, fp8.forward_history());
  r.forward_scale = read(backend, fp8.forward_scale());
  r.backward_history = read(backend, fp8.backward_history());
  r.backward_scale = read(backend, fp8.backward_scale());
}

// The gradients of the experts' and the shared experts' weights (the router's left out: the
// reference does not run it), in the table's order.
inline std::vector<float> expert_grads(const GptParameters& params, const std::vector<float>& all) {
  std::vector<float> out;
  for (const ParameterEntry& e : params.entries()) {
    if (e.name.find(".router.") != std::string::npos) continue;
    if (e.name.find(".mlp.") == std::string::npos) continue;
    out.insert(out.end(), all.begin() + e.offset, all.begin() + e.offset + e.numel());
  }
  return out;
}

// The FP8 state's slots: the shared experts' two linears (dense), then 2 per expert.
inline int64_t dense_linears() { return 2; }
inline int64_t expert_linears(const GptConfig& c) { return 2 * c.moe.num_experts; }

// `passes` training passes of the MoE layer (forward, backward, the FP8 scales updated after each).
inline Result run_layer(Backend& backend, const GptConfig& c, const Inputs& in, int passes) {
  GptParameters params(c, backend);
  set_parameters(params);
  Fp8Training fp8(*c.fp8, backend, dense_linears(), expert_linears(c));
  const MoeLayer layer(params, 0, nullptr, nullptr, &fp8);
  fp8.require_complete();
  const int64_t seq = c.seq_length;
  const int64_t batch = 2;
  MoeBuffers buffers(backend, moe_buffer_sizes(params.config(), seq, batch), true);
  DeviceArray<double> statistics(backend, 2);
  ForwardContext ctx;
  ctx.seq = seq;
  ctx.batch = batch;
  ctx.training = true;
  ctx.moe_statistics = statistics.view();
  const int64_t n = seq * batch * c.hidden_size;
  DeviceBuffer input(backend, n), output(backend, n), d_output(backend, n), d_input(backend, n);
  params.zero_grads();
  Result r;
  for (int pass = 0; pass < passes; ++pass) {
    backend.copy_from_host(std::span<const float>(in.input), input.view());
    backend.copy_from_host(std::span<const float>(in.d_output), d_output.view());
    fp8.begin_forward(0, true);
    layer.forward(ctx, input.view(), buffers.activations(), buffers.scratch(), output.view());
    fp8.finish_forward();
    fp8.begin_backward(0);
    layer.backward(ctx, input.view(), buffers.activations(), buffers.scratch(), d_output.view(), d_input.view());
    fp8.finish_backward();
  }
  const int64_t te = ctx.tokens() * c.moe.num_experts;
  r.output = read(backend, output.view());
  r.routing_map = read(backend, buffers.activations().routing_map.first(te));
  r.probs = read(backend, buffers.activations().probs.first(te));
  r.grads = read(backend, std::as_const(params).grads());
  read_state(backend, fp8, r);
  return r;
}

// The same passes with the routing `routed` gave: each expert's rows (the tokens routed to it,
// in token order, no padding) through an ExpertMlp of its own FP8 linears, weighted by the
// probabilities on the host, plus the shared experts; the backward likewise.
inline Result run_reference(Backend& backend, const GptConfig& c, const Inputs& in, const Result& routed, int passes) {
  GptParameters params(c, backend);
  set_parameters(params);
  Fp8Training fp8(*c.fp8, backend, dense_linears(), expert_linears(c));
  const int64_t E = c.moe.num_experts;
  const int64_t h = c.hidden_size;
  const int64_t tokens = c.seq_length * 2;
  std::vector<ExpertMlp> experts;
  experts.reserve(static_cast<std::size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    experts.emplace_back(params, expert_name(e), &fp8, true);
  const ExpertMlp shared(params, mlp_name(".shared_experts"), &fp8);
  fp8.require_complete();
  params.zero_grads();

  // The rows of each expert, and a [rows, width] buffer of them.
  std::vector<std::vector<int64_t>> rows_of(static_cast<std::size_t>(E));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < E; ++e)
      if (routed.routing_map[static_cast<std::size_t>(t * E + e)] > 0.0f)
        rows_of[static_cast<std::size_t>(e)].push_back(t);
  // weighted: each row times its (token, expert e)'s probability, as the combine's gradient is.
  const auto gather = [&](const std::vector<float>& from, const std::vector<int64_t>& rows, bool weighted,
                          int64_t e) {
    std::vector<float> out(rows.size() * static_cast<std::size_t>(h));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const float w = weighted ? routed.probs[static_cast<std::size_t>(rows[i] * E + e)] : 1.0f;
      for (int64_t j = 0; j < h; ++j)
        out[i * static_cast<std::size_t>(h) + static_cast<std::size_t>(j)] =
            w * from[static_cast<std::size_t>(rows[i] * h + j)];
    }
    return out;
  };
  const auto buffer = [&](int64_t elements) { return DeviceBuffer(backend, std::max<int64_t>(1, elements)); };

  Result r;
  for (int pass = 0; pass < passes; ++pass) {
    fp8.begin_forward(0, true);
    std::vector<float> output(static_cast<std::size_t>(tokens * h), 0.0f);
    struct Saved {
      DeviceBuffer x, fc1, act;
    };
    std::vector<Saved> saved;
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<int64_t>& rows = rows_of[static_cast<std::size_t>(e)];
      const ExpertMlp& mlp = experts[static_cast<std::size_t>(e)];
      const int64_t n = static_cast<int64_t>(rows.size());
      Saved s{buffer(n * h), buffer(n * mlp.fc1_size()), buffer(n * mlp.ffn())};
      DeviceBuffer y = buffer(n * h);
      const std::vector<float> x = gather(in.input, rows, false, e);
      backend.copy_from_host(std::span<const float>(x), s.x.view().first(n * h));
      mlp.forward(s.x.view(), n, s.fc1.view(), s.act.view(), y.view());
      const std::vector<float> yh = read(backend, y.view().first(n * h));
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const float p = routed.probs[static_cast<std::size_t>(rows[i] * E + e)];
        for (int64_t j = 0; j < h; ++j)
          output[static_cast<std::size_t>(rows[i] * h + j)] +=
              p * yh[i * static_cast<std::size_t>(h) + static_cast<std::size_t>(j)];
      }
      saved.push_back(std::move(s));
    }
    DeviceBuffer x(backend, tokens * h), fc1(backend, tokens * shared.fc1_size()), act(backend, tokens * shared.ffn()),
        y(backend, tokens * h);
    backend.copy_from_host(std::span<const float>(in.input), x.view());
    shared.forward(x.view(), tokens, fc1.view(), act.view(), y.view());
    const std::vector<float> yh = read(backend, y.view());
    for (std::size_t i = 0; i < output.size(); ++i) output[i] += yh[i];
    fp8.finish_forward();

    fp8.begin_backward(0);
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<int64_t>& rows = rows_of[static_cast<std::size_t>(e)];
      const ExpertMlp& mlp = experts[static_cast<std::size_t>(e)];
      const int64_t n = static_cast<int64_t>(rows.size());
      const std::vector<float> dy = gather(in.d_output, rows, true, e);
      DeviceBuffer d_y = buffer(n * h), d_act = buffer(n * mlp.ffn()), d_fc1 = buffer(n * mlp.fc1_size()),
                   d_x = buffer(n * h);
      backend.copy_from_host(std::span<const float>(dy), d_y.view().first(n * h));
      const Saved& s = saved[static_cast<std::size_t>(e)];
      mlp.backward(d_y.view(), s.x.view(), n, s.fc1.view(), s.act.view(), d_act.view(), d_fc1.view(), d_x.view());
    }
    DeviceBuffer d_y(backend, tokens * h), d_act(backend, tokens * shared.ffn()),
        d_fc1(backend, tokens * shared.fc1_size()), d_x(backend, tokens * h);
    backend.copy_from_host(std::span<const float>(in.d_output), d_y.view());
    shared.backward(d_y.view(), x.view(), tokens, fc1.view(), act.view(), d_act.view(), d_fc1.view(), d_x.view());
    fp8.finish_backward();
    r.output = output;
  }
  r.grads = read(backend, std::as_const(params).grads());
  read_state(backend, fp8, r);
  return r;
}

// max |a − b| / max |b|.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return a.size() == b.size() && scale > 0.0 ? diff / scale : 1.0;
}

}  // namespace mgt::moe_fp8_testing
