#include <catch2/catch.hpp>

#include <cstdint>
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
