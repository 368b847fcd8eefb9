// The MoE layer in FP8 on the CPU (its casts emulated): two training passes against each expert's
// routed rows run through FP8 linear layers of its own, unpadded (moe_fp8_testing.hpp). One expert
// receives no token and the others row counts that are not multiples of 16, so that the layer
// pads them with zero rows: the output, the experts' and shared experts' weight gradients and
// every amax history and scale must come out as the reference's (zero rows change no amax and
// add nothing), the second pass casting with the scales the first pass's amaxes gave.
#include <catch2/catch.hpp>

#include "kernels/backend_factory.hpp"
#include "moe_fp8_testing.hpp"

using namespace mgt;
using namespace mgt::moe_fp8_testing;

TEST_CASE("moe fp8: experts in FP8 with zero-row padding match per-expert FP8 linears", "[model][moe][fp8]") {
  const std::unique_ptr<Backend> backend = make_backend("cpu");
  const GptConfig c = fp8_moe_config();
  REQUIRE(moe_expert_row_multiple(c) == 16);
  const Inputs in = make_inputs(c, c.seq_length * 2);
  const Result got = run_layer(*backend, c, in, 2);

  // The routing the test means: one idle expert, the others' counts not multiples of 16.
  const int64_t E = c.moe.num_experts;
  std::vector<int64_t> counts(static_cast<std::size_t>(E), 0);
  for (std::size_t i = 0; i < got.routing_map.size(); ++i)
    if (got.routing_map[i] > 0.0f) ++counts[i % static_cast<std::size_t>(E)];
  INFO("rows per expert " << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3]);
  REQUIRE(counts[kIdleExpert] == 0);
  bool unaligned = false;
  for (const int64_t n : counts) unaligned = unaligned || n % 16 != 0;
  REQUIRE(unaligned);

  const Result want = run_reference(*backend, c, in, got, 2);
  GptParameters table(c, *backend);
  CHECK(relative_difference(got.output, want.output) < 1e-5);
  CHECK(relative_difference(expert_grads(table, got.grads), expert_grads(table, want.grads)) < 1e-5);
  // The scales the amaxes gave are what the casts used: equal histories mean equal casts.
  CHECK(relative_difference(got.forward_history, want.forward_history) < 1e-6);
  CHECK(relative_difference(got.backward_history, want.backward_history) < 1e-6);
  CHECK(got.forward_scale == want.forward_scale);
  CHECK(got.backward_scale == want.backward_scale);
  // The idle expert's input recorded no amax (Transformer Engine's cast of an empty input records
  // 0), so its scale stays 1; its weight's was recorded (cast without tokens, as TE's
  // GroupedLinear casts every expert's weight), so that scale moved.
  const int64_t len = c.fp8->amax_history_len;
  const int64_t linears = dense_linears() + expert_linears(c);
  const int64_t idle_fc1 = dense_linears() + 2 * kIdleExpert;
  for (int64_t row = 0; row < len; ++row)
    CHECK(got.forward_history[static_cast<std::size_t>(row * 2 * linears + 2 * idle_fc1)] == 0.0f);
  CHECK(got.forward_scale[static_cast<std::size_t>(2 * idle_fc1)] == 1.0f);
  CHECK(got.forward_scale[static_cast<std::size_t>(2 * idle_fc1 + 1)] != 1.0f);
  // The scales moved away from 1 elsewhere: the second pass cast with scales of its own.
  CHECK(got.forward_scale[0] != 1.0f);
}

TEST_CASE("moe fp8: the routed experts' FP8 state follows the dense layers' and is reduced apart",
          "[model][moe][fp8]") {
  const std::unique_ptr<Backend> backend = make_backend("cpu");
  Fp8Recipe recipe;
  recipe.amax_history_len = 2;
  Fp8Training fp8(recipe, *backend, 1, 2);
  CHECK(fp8.add_linear("decoder.layers.0.mlp.experts.local_experts.4.linear_fc1", 16, 16, true) == 1);
  CHECK(fp8.add_linear("decoder.layers.0.self_attention.linear_qkv", 16, 16) == 0);
  CHECK(fp8.add_linear("decoder.layers.0.mlp.experts.local_experts.4.linear_fc2", 16, 16, true) == 2);
  CHECK_THROWS(fp8.add_linear("one.too.many", 16, 16, true));
  CHECK_FALSE(fp8.expert_linear(0));
  CHECK(fp8.expert_linear(2));
  CHECK(fp8.linear_name(1) == "decoder.layers.0.mlp.experts.local_experts.4.linear_fc1");
  // Each reduction sees its own part of the newest amaxes: forward 2 per linear, backward 1.
  std::vector<int64_t> dense_sizes, expert_sizes;
  fp8.set_amax_reduction([&](FloatView v) { dense_sizes.push_back(v.size()); });
  fp8.set_expert_amax_reduction([&](FloatView v) { expert_sizes.push_back(v.size()); });
  fp8.begin_forward(0, true);
  fp8.finish_forward();
  fp8.begin_backward(0);
  fp8.finish_backward();
  CHECK(dense_sizes == std::vector<int64_t>{2, 1});
  CHECK(expert_sizes == std::vector<int64_t>{4, 2});
}
