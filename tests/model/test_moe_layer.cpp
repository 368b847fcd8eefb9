// The MoE layer on one rank (model/moe_layer.hpp) on the CPU: its output against a direct
// evaluation of Megatron's formula (each token's chosen experts' MLPs weighted by the routing
// probabilities, plus the shared experts), and its gradients (input and every parameter,
// auxiliary and z losses included) against central differences of the same objective; the same
// with the shared experts' sigmoid gate (--moe-shared-expert-gate).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_parameters.hpp"
#include "model/moe_layer.hpp"

using namespace mgt;

namespace {

GptConfig moe_config(Activation activation, double capacity_factor, bool pad, int64_t shared, bool gate = false) {
  GptConfig c;
  c.num_layers = 1;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.seq_length = 6;
  c.padded_vocab_size = 16;
  c.add_bias_linear = false;
  c.activation = activation;
  c.ffn_hidden_size = 12;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  c.moe.num_experts = 4;
  c.moe.layer_pattern = {true};
  c.moe.ffn_hidden_size = 6;
  c.moe.topk = 2;
  c.moe.shared_expert_intermediate_size = shared;
  c.moe.shared_expert_gate = gate;
  c.moe.aux_loss_coeff = 0.05;
  c.moe.z_loss = true;
  c.moe.z_loss_coeff = 0.02;
  c.moe.load_balancing = MoeLoadBalancing::kSeqAuxLoss;
  c.moe.capacity_factor = capacity_factor;
  c.moe.pad_to_capacity = pad;
  return c.resolved();
}

std::vector<float> random_values(std::mt19937& rng, std::size_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

float act(Activation a, const std::vector<float>& z, std::size_t j, std::size_t ffn) {
  const auto gelu = [](float x) { return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f))); };
  if (a == Activation::kSwiglu) return z[j] / (1.0f + std::exp(-z[j])) * z[ffn + j];
  return gelu(z[j]);
}

// y = W2 · act(W1 · x) for one token.
std::vector<float> mlp(Activation a, const std::vector<float>& w1, const std::vector<float>& w2, const float* x,
                       std::size_t h, std::size_t ffn) {
  const std::size_t fc1 = a == Activation::kSwiglu ? 2 * ffn : ffn;
  std::vector<float> z(fc1, 0.0f), y(h, 0.0f);
  for (std::size_t o = 0; o < fc1; ++o)
    for (std::size_t i = 0; i < h; ++i) z[o] += w1[o * h + i] * x[i];
  for (std::size_t o = 0; o < h; ++o)
    for (std::size_t j = 0; j < ffn; ++j) y[o] += w2[o * ffn + j] * act(a, z, j, ffn);
  return y;
}

struct Run {
  std::vector<float> output;
  double aux = 0.0;
  double z = 0.0;
  std::vector<float> probs;
};

class MoeHarness {
public:
  // `shards`: the sequence-parallel ranks whose tokens the layer routes part by part.
  MoeHarness(const GptConfig& c, int64_t seq, int64_t batch, int64_t shards = 1)
      : backend_(make_backend("cpu")), params_(c, *backend_), layer_(params_, 0),
        sizes_(moe_buffer_sizes(params_.config(), seq, batch)), buffers_(*backend_, sizes_, true),
        statistics_(*backend_, 2), input_(*backend_, seq * batch * c.hidden_size),
        output_(*backend_, seq * batch * c.hidden_size), d_output_(*backend_, seq * batch * c.hidden_size),
        d_input_(*backend_, seq * batch * c.hidden_size) {
    ctx_.seq = seq;
    ctx_.batch = batch;
    ctx_.training = true;
    ctx_.sequence_shards = shards;
    ctx_.moe_statistics = statistics_.view();
    params_.initialize(7);
    // Larger weights than the initialisation's, so that every term matters in the checks.
    std::mt19937 rng(3);
    for (const ParameterEntry& e : params_.entries())
      params_.write_param(e, random_values(rng, static_cast<std::size_t>(e.numel()), 0.5f));
  }

  GptParameters& params() { return params_; }
  const MoeBuffers& buffers() const { return buffers_; }
  int64_t tokens() const { return ctx_.tokens(); }

  Run forward(const std::vector<float>& input) {
    backend_->copy_from_host(std::span<const float>(input), input_.view());
    const std::vector<double> zero = {0.0, 0.0};
    backend_->copy_from_host<double>(zero, statistics_.view());
    layer_.forward(ctx_, input_.view(), buffers_.activations(), buffers_.scratch(), output_.view());
    Run r;
    r.output = read(output_.view());
    r.probs = read(buffers_.activations().probs.first(tokens() * params_.config().moe.num_experts));
    double s[2];
    backend_->copy_to_host(DeviceSpan<const double>(statistics_.view()), std::span<double>(s));
    r.aux = s[0];
    r.z = s[1];
    return r;
  }

  // The objective whose gradient backward computes for d_output: Σ d_output·output plus the
  // auxiliary and z losses with their coefficients.
  double objective(const std::vector<float>& input, const std::vector<float>& d_output) {
    const Run r = forward(input);
    double sum = 0.0;
    for (std::size_t i = 0; i < r.output.size(); ++i) sum += static_cast<double>(d_output[i]) * r.output[i];
    const MoeConfig& m = params_.config().moe;
    return sum + m.aux_loss_coeff * r.aux + m.z_loss_coeff * r.z;
  }

  // Gradients of the objective: input's returned, parameters' in params().grads().
  std::vector<float> backward(const std::vector<float>& input, const std::vector<float>& d_output) {
    forward(input);
    backend_->fill(params_.grads(), 0.0f);
    backend_->copy_from_host(std::span<const float>(d_output), d_output_.view());
    layer_.backward(ctx_, input_.view(), buffers_.activations(), buffers_.scratch(), d_output_.view(), d_input_.view());
    return read(d_input_.view());
  }

  std::vector<float> read(ConstFloatView v) {
    std::vector<float> host(static_cast<std::size_t>(v.size()));
    backend_->copy_to_host(v, std::span<float>(host));
    return host;
  }

private:
  std::unique_ptr<Backend> backend_;
  GptParameters params_;
  MoeLayer layer_;
  MoeBufferSizes sizes_;
  MoeBuffers buffers_;
  DeviceArray<double> statistics_;
  DeviceBuffer input_, output_, d_output_, d_input_;
  ForwardContext ctx_;
};

void check_output(Activation activation, double capacity_factor, bool pad, int64_t shared, bool gate = false) {
  const GptConfig c = moe_config(activation, capacity_factor, pad, shared, gate);
  MoeHarness harness(c, 6, 2);
  std::mt19937 rng(11);
  const std::size_t h = static_cast<std::size_t>(c.hidden_size);
  const std::vector<float> input = random_values(rng, static_cast<std::size_t>(harness.tokens()) * h, 1.0f);
  const Run r = harness.forward(input);
  GptParameters& p = harness.params();
  const std::size_t E = static_cast<std::size_t>(c.moe.num_experts);
  std::size_t routed = 0;
  double diff = 0.0, scale = 0.0;
  for (std::size_t t = 0; t < static_cast<std::size_t>(harness.tokens()); ++t) {
    std::vector<double> want(h, 0.0);
    for (std::size_t e = 0; e < E; ++e) {
      const float prob = r.probs[t * E + e];
      if (prob == 0.0f) continue;
      ++routed;
      const std::string prefix = "decoder.layers.0.mlp.experts.local_experts." + std::to_string(e);
      const std::vector<float> y = mlp(activation, p.read_param(p.entry(prefix + ".linear_fc1.weight")),
                                       p.read_param(p.entry(prefix + ".linear_fc2.weight")), &input[t * h], h,
                                       static_cast<std::size_t>(c.moe.ffn_hidden_size));
      for (std::size_t i = 0; i < h; ++i) want[i] += prob * y[i];
    }
    if (shared > 0) {
      const std::vector<float> y = mlp(activation, p.read_param(p.entry("decoder.layers.0.mlp.shared_experts.linear_fc1.weight")),
                                       p.read_param(p.entry("decoder.layers.0.mlp.shared_experts.linear_fc2.weight")),
                                       &input[t * h], h, static_cast<std::size_t>(shared));
      // SharedExpertMLP's gate: the output times sigmoid(w_gate · x).
      double g = 1.0;
      if (gate) {
        const std::vector<float> w = p.read_param(p.entry("decoder.layers.0.mlp.shared_experts.gate_weight"));
        double logit = 0.0;
        for (std::size_t i = 0; i < h; ++i) logit += static_cast<double>(w[i]) * input[t * h + i];
        g = 1.0 / (1.0 + std::exp(-logit));
      }
      for (std::size_t i = 0; i < h; ++i) want[i] += g * y[i];
    }
    for (std::size_t i = 0; i < h; ++i) {
      diff = std::max(diff, std::fabs(want[i] - r.output[t * h + i]));
      scale = std::max(scale, std::fabs(want[i]));
    }
  }
  CHECK(diff / scale < 1e-5);
  if (capacity_factor < 0) CHECK(routed == static_cast<std::size_t>(harness.tokens() * c.moe.topk));
  else CHECK(routed < static_cast<std::size_t>(harness.tokens() * c.moe.topk));  // some dropped at 0.5
}

// `straight_through`: the router's logits are random (--moe-router-force-load-balancing), so the
// objective does not depend on its weight, nor on the input through it, while the backward passes
// the logits' gradient on: the input and the router's weight are left out.
void check_gradients(const GptConfig& c, const std::vector<float>& expert_bias = {}, bool straight_through = false) {
  MoeHarness harness(c, 6, 2);
  if (!expert_bias.empty()) harness.params().moe_expert_bias().write(0, expert_bias);
  std::mt19937 rng(5);
  const std::size_t n = static_cast<std::size_t>(harness.tokens() * c.hidden_size);
  const std::vector<float> input = random_values(rng, n, 1.0f);
  const std::vector<float> d_output = random_values(rng, n, 1.0f);
  const std::vector<float> d_input = harness.backward(input, d_output);
  GptParameters& p = harness.params();
  const std::vector<float> grads = harness.read(p.grads());

  // Directional derivatives along random directions, by central differences.
  const float eps = 1e-3f;
  if (!straight_through) {
    const std::vector<float> v = random_values(rng, n, 1.0f);
    std::vector<float> up = input, down = input;
    double analytic = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      up[i] += eps * v[i];
      down[i] -= eps * v[i];
      analytic += static_cast<double>(d_input[i]) * v[i];
    }
    const double numeric = (harness.objective(up, d_output) - harness.objective(down, d_output)) / (2.0 * eps);
    INFO("input: analytic " << analytic << ", numeric " << numeric);
    CHECK(std::fabs(analytic - numeric) <= 2e-3 * std::max(1.0, std::fabs(numeric)));
  }
  const std::vector<float> params = harness.read(p.params());
  for (const ParameterEntry& e : p.entries()) {
    if (straight_through && e.name.find(".router.") != std::string::npos) continue;
    const std::vector<float> v = random_values(rng, static_cast<std::size_t>(e.numel()), 1.0f);
    std::vector<float> up = p.read_param(e), down = up;
    double analytic = 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      up[i] += eps * v[i];
      down[i] -= eps * v[i];
      analytic += static_cast<double>(grads[static_cast<std::size_t>(e.offset) + i]) * v[i];
    }
    p.write_param(e, up);
    const double plus = harness.objective(input, d_output);
    p.write_param(e, down);
    const double minus = harness.objective(input, d_output);
    p.write_param(e, std::span<const float>(params.data() + e.offset, static_cast<std::size_t>(e.numel())));
    const double numeric = (plus - minus) / (2.0 * eps);
    INFO(e.name << ": analytic " << analytic << ", numeric " << numeric);
    CHECK(std::fabs(analytic - numeric) <= 2e-3 * std::max(1.0, std::fabs(numeric)));
  }
}

}  // namespace

TEST_CASE("moe layer: the output is Megatron's weighted sum of experts", "[model][moe]") {
  check_output(Activation::kSwiglu, -1.0, false, 0);
  check_output(Activation::kGelu, -1.0, false, 5);
  check_output(Activation::kSwiglu, 0.5, false, 0);
  check_output(Activation::kSwiglu, 0.5, true, 3);
}

TEST_CASE("moe layer: the shared experts' sigmoid gate, output and gradients", "[model][moe]") {
  check_output(Activation::kSwiglu, -1.0, false, 5, true);
  check_output(Activation::kGelu, 0.5, true, 3, true);
  const GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 4, true);
  const auto backend = make_backend("cpu");
  GptParameters params(c, *backend);
  CHECK(params.entry("decoder.layers.0.mlp.shared_experts.gate_weight").global_shape ==
        std::vector<int64_t>{1, c.hidden_size});
  check_gradients(c);
}

TEST_CASE("moe layer: gradients against central differences", "[model][moe]") {
  check_gradients(moe_config(Activation::kSwiglu, -1.0, false, 4));
  check_gradients(moe_config(Activation::kGelu, 0.5, true, 0));
}

// --moe-router-load-balancing-type sinkhorn: the experts chosen by the Sinkhorn balancing of the
// logits in training, the gates the softmax over all experts (top-2) or the sigmoid (top-1).
TEST_CASE("moe layer: sinkhorn routing, gradients against central differences", "[model][moe]") {
  GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 3);
  c.moe.load_balancing = MoeLoadBalancing::kSinkhorn;
  c.moe.aux_loss_coeff = 0.0;
  check_gradients(c);
  c.moe.topk = 1;
  check_gradients(c);
}

// --moe-input-jitter-eps: the gate reads its input times noise regenerated in the backward;
// --moe-router-enable-expert-bias: the sigmoid scores' choice shifted by the bias. The gradients
// still match central differences of the objective of that noise and that bias, and each of
// them changes the route.
TEST_CASE("moe layer: input jitter and expert bias, gradients and routes", "[model][moe]") {
  GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 0);
  c.moe.score_function = MoeScoreFunction::kSigmoid;
  c.moe.enable_expert_bias = true;
  const std::vector<float> bias = {0.3f, -0.2f, 0.1f, 0.0f};
  check_gradients(c, bias);
  c.moe.input_jitter_eps = 0.3;
  check_gradients(c, bias);

  std::mt19937 rng(17);
  const std::vector<float> input = random_values(rng, 12 * static_cast<std::size_t>(c.hidden_size), 1.0f);
  GptConfig plain = c;
  plain.moe.input_jitter_eps = 0.0;
  plain.moe.enable_expert_bias = false;
  GptConfig biased = plain;
  biased.moe.enable_expert_bias = true;
  MoeHarness a(plain, 6, 2), b(biased, 6, 2), j(c, 6, 2);
  b.params().moe_expert_bias().write(0, std::vector<float>{0.0f, 0.0f, 0.0f, 0.5f});
  j.params().moe_expert_bias().write(0, std::vector<float>(4, 0.0f));
  const std::vector<float> routes = a.forward(input).probs;
  const std::vector<float> biased_routes = b.forward(input).probs;
  CHECK(biased_routes != routes);
  // Every token whose top two included expert 3 still does; more tokens choose it.
  auto chose3 = [](const std::vector<float>& probs) {
    std::size_t n = 0;
    for (std::size_t t = 0; t < probs.size() / 4; ++t) n += probs[t * 4 + 3] > 0.0f;
    return n;
  };
  CHECK(chose3(biased_routes) > chose3(routes));
  CHECK(j.forward(input).probs != routes);
  CHECK(j.forward(input).probs == j.forward(input).probs);  // the same noise every time

  // A training forward counts each expert's tokens after the capacity; padded to the capacity
  // (Megatron's map then the capacity mask, equal counts) it counts none.
  for (const bool pad : {false, true}) {
    GptConfig dropping = moe_config(Activation::kSwiglu, 0.5, pad, 0);
    dropping.moe.score_function = MoeScoreFunction::kSigmoid;
    dropping.moe.enable_expert_bias = true;
    MoeHarness h(dropping, 6, 2);
    const Run r = h.forward(input);
    std::vector<float> counts(4);
    h.params().backend().copy_to_host(ConstFloatView(h.params().moe_expert_bias().tokens_per_expert(0)), counts);
    std::vector<float> kept(4, 0.0f);
    for (std::size_t t = 0; t < 12; ++t)
      for (std::size_t e = 0; e < 4; ++e) kept[e] += r.probs[t * 4 + e] > 0.0f ? 1.0f : 0.0f;
    CHECK(counts == (pad ? std::vector<float>(4, 0.0f) : kept));
    if (!pad) CHECK(kept[0] + kept[1] + kept[2] + kept[3] < 24.0f);  // some dropped
  }
}

// --moe-apply-probs-on-input (top-1, Llama 4's experts): each token's expert reads its input times
// the routing probability and its output is added unweighted; the gradients (the probabilities'
// through the input's side) against central differences, with and without a capacity.
TEST_CASE("moe layer: probabilities applied on the experts' input", "[model][moe]") {
  for (const double capacity : {-1.0, 0.5}) {
    GptConfig c = moe_config(Activation::kSwiglu, capacity, false, 4);
    c.moe.topk = 1;
    c.moe.score_function = MoeScoreFunction::kSigmoid;
    c.moe.apply_probs_on_input = true;
    check_gradients(c);
    MoeHarness harness(c, 6, 2);
    std::mt19937 rng(29);
    const std::size_t h = static_cast<std::size_t>(c.hidden_size);
    const std::size_t E = static_cast<std::size_t>(c.moe.num_experts);
    const std::size_t ffn = static_cast<std::size_t>(c.moe.ffn_hidden_size);
    const std::vector<float> input = random_values(rng, 12 * h, 1.0f);
    const Run r = harness.forward(input);
    GptParameters& p = harness.params();
    const std::string mlp_prefix = "decoder.layers.0.mlp.";
    double diff = 0.0, scale = 0.0;
    std::size_t routed = 0;
    for (std::size_t t = 0; t < 12; ++t) {
      std::vector<double> want(h, 0.0);
      for (std::size_t e = 0; e < E; ++e) {
        const float prob = r.probs[t * E + e];
        if (prob == 0.0f) continue;
        ++routed;
        std::vector<float> scaled(input.begin() + static_cast<std::ptrdiff_t>(t * h),
                                  input.begin() + static_cast<std::ptrdiff_t>((t + 1) * h));
        for (float& v : scaled) v *= prob;
        const std::string expert = mlp_prefix + "experts.local_experts." + std::to_string(e);
        const std::vector<float> y = mlp(Activation::kSwiglu, p.read_param(p.entry(expert + ".linear_fc1.weight")),
                                         p.read_param(p.entry(expert + ".linear_fc2.weight")), scaled.data(), h, ffn);
        for (std::size_t i = 0; i < h; ++i) want[i] += y[i];
      }
      const std::vector<float> y = mlp(Activation::kSwiglu, p.read_param(p.entry(mlp_prefix + "shared_experts.linear_fc1.weight")),
                                       p.read_param(p.entry(mlp_prefix + "shared_experts.linear_fc2.weight")),
                                       &input[t * h], h, 4);
      for (std::size_t i = 0; i < h; ++i) {
        want[i] += y[i];
        diff = std::max(diff, std::fabs(want[i] - r.output[t * h + i]));
        scale = std::max(scale, std::fabs(want[i]));
      }
    }
    CHECK(diff / scale < 1e-5);
    if (capacity < 0) CHECK(routed == 12);
    else CHECK(routed < 12);  // some dropped at 0.5
  }
}

// --moe-router-force-load-balancing (Megatron's RandomSTE): the tokens go to the top-k of standard
// normal logits drawn again for every call alike, not of the router's; the experts' gradients are
// still those of the objective, and the router's weight takes the random logits' gradient, passed
// straight through: Σ over tokens of d_logits ⊗ x.
TEST_CASE("moe layer: forced load balancing routes by random logits, their gradient passed straight", "[model][moe]") {
  GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 0);
  c.moe.force_load_balancing = true;
  check_gradients(c, {}, true);

  const GptConfig plain = moe_config(Activation::kSwiglu, -1.0, false, 0);
  MoeHarness forced(c, 6, 2), routed(plain, 6, 2);
  std::mt19937 rng(23);
  const std::size_t h = static_cast<std::size_t>(c.hidden_size);
  const std::size_t E = static_cast<std::size_t>(c.moe.num_experts);
  const std::size_t tokens = 12;
  const std::vector<float> input = random_values(rng, tokens * h, 1.0f);
  const std::vector<float> probs = forced.forward(input).probs;
  CHECK(probs != routed.forward(input).probs);
  CHECK(forced.forward(input).probs == probs);  // the same draws again (a recomputed forward)
  const std::vector<float> logits = forced.read(forced.buffers().activations().logits.first(int64_t(tokens * E)));
  double square = 0.0;
  for (std::size_t t = 0; t < tokens; ++t) {
    // Each token's two largest logits are its two experts.
    std::vector<std::size_t> order(E);
    for (std::size_t e = 0; e < E; ++e) order[e] = e;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[t * E + a] > logits[t * E + b]; });
    for (std::size_t k = 0; k < E; ++k) CHECK((probs[t * E + order[k]] > 0.0f) == (k < 2));
    for (std::size_t e = 0; e < E; ++e) square += static_cast<double>(logits[t * E + e]) * logits[t * E + e];
  }
  CHECK(square / static_cast<double>(tokens * E) == Approx(1.0).margin(0.5));  // draws of variance 1

  const std::vector<float> d_output = random_values(rng, tokens * h, 1.0f);
  forced.backward(input, d_output);
  GptParameters& p = forced.params();
  const std::vector<float> d_logits = forced.read(forced.buffers().scratch().d_logits.first(int64_t(tokens * E)));
  const std::vector<float> gate_grad = forced.read(p.grad(p.entry("decoder.layers.0.mlp.router.weight")));
  double diff = 0.0, scale = 0.0;
  for (std::size_t e = 0; e < E; ++e)
    for (std::size_t i = 0; i < h; ++i) {
      double want = 0.0;
      for (std::size_t t = 0; t < tokens; ++t) want += static_cast<double>(d_logits[t * E + e]) * input[t * h + i];
      diff = std::max(diff, std::fabs(want - gate_grad[e * h + i]));
      scale = std::max(scale, std::fabs(want));
    }
  CHECK(scale > 0.0);
  CHECK(diff <= 1e-5 * scale);
}

// Megatron's router under sequence parallelism sees one rank's tokens: each expert's capacity is
// that of a rank's tokens and the drops are among them. The layer, given the whole sequence,
// routes each part as a layer given that part alone does (its outputs and probabilities), and
// drops other tokens than one capacity over the whole sequence would.
TEST_CASE("moe layer: sequence-parallel parts are routed with their own capacity", "[model][moe]") {
  for (const bool pad : {false, true}) {
    GptConfig c = moe_config(Activation::kSwiglu, 1.0, pad, 0);
    c.moe.sequence_parallel_size = 2;  // buffers for the parts' capacities
    MoeHarness parts(c, 6, 2, 2);
    MoeHarness part(c, 3, 2);
    MoeHarness whole(c, 6, 2);
    std::mt19937 rng(5);
    const std::size_t h = static_cast<std::size_t>(c.hidden_size);
    const std::size_t e = static_cast<std::size_t>(c.moe.num_experts);
    const std::vector<float> input = random_values(rng, static_cast<std::size_t>(parts.tokens()) * h, 1.0f);
    const Run r = parts.forward(input);
    const std::size_t n = input.size() / 2;
    for (std::size_t s = 0; s < 2; ++s) {
      const Run p = part.forward(std::vector<float>(input.begin() + static_cast<std::ptrdiff_t>(s * n),
                                                    input.begin() + static_cast<std::ptrdiff_t>((s + 1) * n)));
      // The same tokens dropped; the kept probabilities within rounding: the router's GEMM over 6
      // rows and over 3 may add in different orders (OpenBLAS picks its kernel by the matrix's
      // size on some processors, AVX-512 ones among them).
      for (std::size_t i = 0; i < p.probs.size(); ++i) {
        const float got = r.probs[s * p.probs.size() + i];
        CHECK((got == 0.0f) == (p.probs[i] == 0.0f));
        CHECK(got == Approx(p.probs[i]).epsilon(1e-6));
      }
      for (std::size_t i = 0; i < n; ++i) CHECK(r.output[s * n + i] == Approx(p.output[i]).margin(1e-6));
    }
    CHECK(whole.forward(input).probs != r.probs);
    CHECK(r.probs.size() == static_cast<std::size_t>(parts.tokens()) * e);
  }
}

// With expert parallelism each rank's table holds its share of the experts, named by their
// global number and placed after everything else (Megatron's expert-parallel buffers); the
// router and shared experts stay with the dense parameters.
TEST_CASE("moe parameters: expert-parallel ranks hold their experts by global number, last", "[model][moe]") {
  GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 4);
  c.num_layers = 2;
  c.moe.layer_pattern = {false, true};
  const ParameterTable whole = gpt_parameter_table(c);
  CHECK(whole.expert_begin == whole.buffer_size);
  CHECK(whole.at("decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight").expert_parallel);
  CHECK_FALSE(whole.at("decoder.layers.1.mlp.shared_experts.linear_fc2.weight").expert_parallel);

  const ParameterTable second = gpt_parameter_table(c, {}, {}, ExpertParallelRank{2, 1});
  std::vector<std::string> experts;
  for (const ParameterEntry& e : second.entries) {
    CHECK(e.expert_parallel == (e.offset >= second.expert_begin));
    if (e.expert_parallel) experts.push_back(e.name);
  }
  CHECK(experts == std::vector<std::string>{"decoder.layers.1.mlp.experts.local_experts.2.linear_fc1.weight",
                                            "decoder.layers.1.mlp.experts.local_experts.2.linear_fc2.weight",
                                            "decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight",
                                            "decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight"});
  CHECK(second.find("decoder.layers.1.mlp.experts.local_experts.0.linear_fc1.weight") == nullptr);
  CHECK(second.find("decoder.layers.1.mlp.router.weight")->offset < second.expert_begin);
  CHECK(second.entries.back().expert_parallel);
  CHECK(second.at("decoder.layers.1.mlp.experts.local_experts.2.linear_fc1.weight").global_shape ==
        whole.at("decoder.layers.1.mlp.experts.local_experts.2.linear_fc1.weight").global_shape);
  CHECK_THROWS_WITH(gpt_parameter_table(c, {}, {}, ExpertParallelRank{3, 0}),
                    "expert-parallel rank 0 of 3 cannot hold an equal share of 4 experts");
}

// --expert-tensor-parallel-size 1 under tensor parallelism: whole experts. With one expert-parallel
// rank every tensor-parallel rank holds all of them (replicated, their gradients summed over the
// group as sequence-parallel ones); with expert parallelism across the tensor-parallel ranks each
// holds its own, counted in norms on every rank and left out of the tensor-parallel reduction.
TEST_CASE("moe parameters: whole experts, replicated or each tensor-parallel rank's own", "[model][moe]") {
  GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 4);
  c.moe.expert_tensor_parallel_size = 1;
  const std::string expert = "decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight";
  const ParameterTable replicated = gpt_parameter_table(c, {2, 1});
  const ParameterEntry& r = replicated.at(expert);
  CHECK(r.partition_dim == kNotPartitioned);
  CHECK(r.local_shape == r.global_shape);
  CHECK(r.tensor_parallel_replicated);
  CHECK(r.sequence_parallel);
  CHECK_FALSE(r.counted_on({2, 1}));

  const ParameterTable own = gpt_parameter_table(c, {2, 1}, {}, ExpertParallelRank{2, 1});
  const ParameterEntry& o = own.at(expert);
  CHECK(o.partition_dim == kNotPartitioned);
  CHECK(o.local_shape == o.global_shape);
  CHECK(o.expert_parallel);
  CHECK(o.offset >= own.expert_begin);
  CHECK_FALSE(o.tensor_parallel_replicated);
  CHECK_FALSE(o.sequence_parallel);
  CHECK(o.counted_on({2, 1}));
  // The shared experts stay split as the dense MLP's.
  CHECK(own.at("decoder.layers.0.mlp.shared_experts.linear_fc1.weight").partition_dim == 0);
}

// Any other --expert-tensor-parallel-size: the routed experts split as the dense MLP's (linear_fc1
// by output features, gate and up halves each; linear_fc2 by input features) over the
// expert-tensor-parallel ranks, whatever the tensor-parallel rank; this rank's own, in the expert
// region, so that checkpoints record that split and reshard from it.
TEST_CASE("moe parameters: experts split over expert-tensor-parallel ranks of their own", "[model][moe]") {
  GptConfig c = moe_config(Activation::kSwiglu, -1.0, false, 4);
  c.moe.expert_tensor_parallel_size = 2;
  c.num_attention_heads = 4;  // tensor-parallel size 4 below
  const std::string fc1 = "decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight";
  const std::string fc2 = "decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight";
  // TP 1, expert-tensor rank 1 of 2, EP 2 (rank 1: experts 2 and 3).
  const ParameterTable t = gpt_parameter_table(c, {}, {}, ExpertParallelRank{2, 1, 2, 1});
  const ParameterEntry& a = t.at(fc1);
  CHECK(a.global_shape == std::vector<int64_t>{12, 8});
  CHECK(a.local_shape == std::vector<int64_t>{6, 8});
  CHECK(a.partition_dim == 0);
  CHECK(a.partition_chunks == 2);
  CHECK(a.expert_tensor.size == 2);
  CHECK(a.expert_tensor.rank == 1);
  CHECK(a.expert_parallel);
  CHECK(a.offset >= t.expert_begin);
  CHECK(a.counted_on({}));
  // Local row 0 is global gate row 3 (rank 1's half of 6), local row 3 global up row 9.
  CHECK(a.global_index(0, {}) == 3 * 8);
  CHECK(a.global_index(3 * 8 + 1, {}) == 9 * 8 + 1);
  const ParameterEntry& b = t.at(fc2);
  CHECK(b.local_shape == std::vector<int64_t>{8, 3});
  CHECK(b.partition_dim == 1);
  CHECK(b.global_index(1, {}) == 4);
  // Under TP 4 the expert-tensor split holds: its rank, not the tensor-parallel one, places it.
  const ParameterTable wide = gpt_parameter_table(c, {4, 2}, {}, ExpertParallelRank{1, 0, 2, 0});
  CHECK(wide.at(fc2).local_shape == std::vector<int64_t>{8, 3});
  CHECK(wide.at(fc2).global_index(1, {4, 2}) == 1);
  CHECK(wide.expert_begin < wide.buffer_size);
  // The router and the shared experts stay with the dense parameters, split by the tensor size.
  CHECK(wide.at("decoder.layers.0.mlp.shared_experts.linear_fc1.weight").expert_tensor.size == 0);
  CHECK(wide.at("decoder.layers.0.mlp.router.weight").offset < wide.expert_begin);
  CHECK_THROWS_WITH(gpt_parameter_table(c, {}, {}, ExpertParallelRank{1, 0, 4, 0}),
                    "expert-tensor-parallel rank 0 of 4 cannot hold an equal share of the experts' 6 hidden units");
}
