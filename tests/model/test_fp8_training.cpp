#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model/fp8_training.hpp"

using namespace mgt;

namespace {

std::vector<uint8_t> codes_of(Backend& backend, ConstFp8View v) {
  std::vector<uint8_t> host(static_cast<size_t>(v.codes.size()));
  backend.copy_to_host<const uint8_t>(v.codes, host);
  return host;
}

void fill_codes(Backend& backend, Fp8View v, uint8_t value) {
  backend.copy_from_host<uint8_t>(std::vector<uint8_t>(static_cast<size_t>(v.codes.size()), value), v.codes);
}

}  // namespace

TEST_CASE("fp8 training: a training forward keeps its inputs' transposed codes for its slot's backward, once",
          "[model][fp8]") {
  const auto owner = make_backend("cpu");
  Backend& backend = *owner;
  Fp8Training fp8(Fp8Recipe{}, backend, 2);
  fp8.add_linear("decoder.layers.0.self_attention.linear_qkv", 48, 32);
  fp8.add_linear("decoder.layers.0.self_attention.linear_proj", 32, 48);

  // An evaluation forward keeps nothing.
  fp8.begin_forward(0, false);
  CHECK(fp8.keep_input_columns(0, 64).empty());

  // Two micro-batch slots in flight (a pipeline's warm-up): each keeps its own copy.
  fp8.begin_forward(0, true);
  const Fp8View slot0 = fp8.keep_input_columns(0, 64);
  REQUIRE(slot0.codes.size() == 64);
  CHECK(slot0.scale_inv.size() == 1);
  fill_codes(backend, slot0, 7);
  fp8.finish_forward();
  fp8.begin_forward(1, true);
  const Fp8View slot1 = fp8.keep_input_columns(0, 64);
  REQUIRE(slot1.codes.size() == 64);
  CHECK(slot1.codes.data() != slot0.codes.data());
  fill_codes(backend, slot1, 9);
  fp8.finish_forward();

  fp8.begin_backward(0);
  CHECK(fp8.take_input_columns(1, 64).empty());   // layer 1 kept nothing
  CHECK(fp8.take_input_columns(0, 128).empty());  // another extent: the backward casts again
  const ConstFp8View taken = fp8.take_input_columns(0, 64);
  REQUIRE(taken.codes.size() == 64);
  CHECK(codes_of(backend, taken) == std::vector<uint8_t>(64, 7));
  CHECK(fp8.take_input_columns(0, 64).empty());  // handed out once
  fp8.finish_backward();
  fp8.begin_backward(1);
  CHECK(codes_of(backend, fp8.take_input_columns(0, 64)) == std::vector<uint8_t>(64, 9));
  fp8.finish_backward();

  // Full recomputation keeps nothing.
  fp8.set_keep_input_columns(false);
  fp8.begin_forward(0, true);
  CHECK(fp8.keep_input_columns(0, 64).empty());
}

TEST_CASE("fp8 training: --no-fp8-wgrad keeps no transposed inputs", "[model][fp8]") {
  const auto owner = make_backend("cpu");
  Backend& backend = *owner;
  Fp8Recipe recipe;
  recipe.wgrad = false;
  Fp8Training fp8(recipe, backend, 1);
  fp8.add_linear("decoder.layers.0.mlp.linear_fc1", 64, 32);
  fp8.begin_forward(Fp8Training::kWholeModelSlot, true);
  CHECK(fp8.keep_input_columns(0, 64).empty());
}

namespace {

float value_of(Backend& backend, ConstFloatView v) {
  float host = 0.0f;
  backend.copy_to_host(v, std::span<float>(&host, 1));
  return host;
}

// Casts `values` with `scaling` into the scratch of `which`, as a layer's cast does.
void cast(Backend& backend, Fp8Training& fp8, const std::vector<float>& values, const Fp8Scaling& scaling,
          Fp8Training::Scratch which, Fp8Format format) {
  DeviceBuffer x(backend, static_cast<int64_t>(values.size()));
  backend.copy_from_host(std::span<const float>(values), x.view());
  const Fp8View out = fp8.scratch(which, x.size(), format);
  backend.fp8_quantize(x.view(), 1, x.size(), scaling, out, {});
}

}  // namespace

TEST_CASE("fp8 training: --fp8-first-step-tensorwise casts the first training pass with each tensor's own amax",
          "[model][fp8]") {
  const auto owner = make_backend("cpu");
  Backend& backend = *owner;
  Fp8Recipe recipe;
  recipe.backward_format = Fp8Format::kE5M2;
  recipe.amax_history_len = 4;
  recipe.amax_compute_algo = Fp8AmaxAlgo::kMax;
  recipe.first_step_tensorwise = true;
  const std::vector<float> input = {0.25f, -0.5f, 0.125f};  // amax 0.5
  const std::vector<float> weight = {0.01f, -0.03f};        // amax 0.03
  const std::vector<float> grad = {1e-6f, -4e-6f};          // amax 4e-6: below E5M2's range at scale 1
  using S = Fp8Training::Scratch;

  SECTION("the first forward and backward take their tensors' own amaxes, then the histories decide") {
    Fp8Training fp8(recipe, backend, 1);
    fp8.add_linear("decoder.layers.0.mlp.linear_fc1", 2, 1);
    // An evaluation first records nothing and casts with the initial scale.
    fp8.begin_forward(0, false);
    CHECK_FALSE(fp8.input_scaling(0).current);
    CHECK(value_of(backend, fp8.input_scaling(0).scale) == 1.0f);

    fp8.begin_forward(0, true);
    const Fp8Scaling in = fp8.input_scaling(0);
    const Fp8Scaling w = fp8.weight_scaling(0);
    CHECK(in.current);
    CHECK(w.current);
    cast(backend, fp8, input, in, S::kInputRows, Fp8Format::kE4M3);
    cast(backend, fp8, weight, w, S::kInputColumns, Fp8Format::kE4M3);
    CHECK(value_of(backend, in.scale) == fp8_current_scale(0.5f, Fp8Format::kE4M3));
    CHECK(value_of(backend, w.scale) == fp8_current_scale(0.03f, Fp8Format::kE4M3));
    CHECK(value_of(backend, fp8.forward_history().subspan(0, 1)) == 0.5f);
    CHECK(value_of(backend, fp8.forward_history().subspan(1, 1)) == 0.03f);
    fp8.finish_forward();

    // The backward recasts the input with the scale its forward took.
    fp8.begin_backward(0);
    const Fp8Scaling again = fp8.input_rescaling(0);
    CHECK_FALSE(again.current);
    CHECK(value_of(backend, again.scale) == fp8_current_scale(0.5f, Fp8Format::kE4M3));
    const Fp8Scaling rows = fp8.grad_scaling(0, S::kGradRows);
    const Fp8Scaling columns = fp8.grad_scaling(0, S::kGradColumns);
    CHECK(rows.current);
    CHECK(columns.current);
    CHECK(rows.amax.data() == fp8.backward_history().data());
    CHECK(columns.amax.data() != fp8.backward_history().data());  // recorded once, by the rows
    cast(backend, fp8, grad, rows, S::kGradRows, Fp8Format::kE5M2);
    CHECK(value_of(backend, rows.scale) == fp8_current_scale(4e-6f, Fp8Format::kE5M2));
    fp8.finish_backward();

    // From here on, delayed scaling from the recorded amaxes.
    fp8.begin_forward(1, true);
    CHECK_FALSE(fp8.input_scaling(0).current);
    CHECK_FALSE(fp8.weight_scaling(0).current);
    CHECK(value_of(backend, fp8.input_scaling(0).scale) == fp8_scaled_max(Fp8Format::kE4M3, 0) / 0.5f);
    fp8.finish_forward();
    fp8.begin_backward(1);
    CHECK_FALSE(fp8.grad_scaling(0, S::kGradRows).current);
    CHECK(value_of(backend, fp8.grad_scaling(0, S::kGradRows).scale) == fp8_scaled_max(Fp8Format::kE5M2, 0) / 4e-6f);
  }

  SECTION("without it the first pass casts with scales of 1, as Transformer Engine does") {
    recipe.first_step_tensorwise = false;
    Fp8Training fp8(recipe, backend, 1);
    fp8.add_linear("decoder.layers.0.mlp.linear_fc1", 2, 1);
    fp8.begin_forward(0, true);
    CHECK_FALSE(fp8.input_scaling(0).current);
    CHECK_FALSE(fp8.weight_scaling(0).current);
    CHECK(value_of(backend, fp8.input_scaling(0).scale) == 1.0f);
    fp8.finish_forward();
    fp8.begin_backward(0);
    CHECK_FALSE(fp8.grad_scaling(0, S::kGradRows).current);
  }

  SECTION("a state with recorded histories (a checkpoint's) is delayed from its first pass; one without is not") {
    Fp8Training fp8(recipe, backend, 2);
    fp8.add_linear("decoder.layers.0.mlp.linear_fc1", 2, 1);
    fp8.add_linear("decoder.layers.0.mlp.linear_fc2", 1, 2);
    std::vector<Fp8Training::LinearState> state(2);
    state[0] = {{0.5f, 0.03f, 0, 0, 0, 0, 0, 0}, {896.0f, 4.0f}, {4e-6f, 0, 0, 0}, {2.0f}};
    fp8.write_state(state);  // layer 1 given nothing: it keeps its empty histories
    fp8.begin_forward(0, true);
    CHECK_FALSE(fp8.input_scaling(0).current);
    CHECK(value_of(backend, fp8.input_scaling(0).scale) == 896.0f);
    CHECK(fp8.input_scaling(1).current);
    fp8.finish_forward();
    fp8.begin_backward(0);
    CHECK_FALSE(fp8.grad_scaling(0, S::kGradRows).current);
    CHECK(fp8.grad_scaling(1, S::kGradRows).current);
  }
}
