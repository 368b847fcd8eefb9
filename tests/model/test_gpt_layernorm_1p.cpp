// --apply-layernorm-1p: a model whose norm weights are stored zero-centred computes, with stored
// weights w − 1, exactly what the plain model computes with w, and both get the same gradients
// for the norm weights (∂(1 + w)/∂w = 1).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

bool is_norm_weight(const ParameterEntry& e) { return e.name.find("layernorm.weight") != std::string::npos; }

void check_zero_centred_matches_plain(GptConfig config) {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel plain(config, backend, 5);
  randomize_parameters(plain.parameters(), 5);
  config.layernorm_zero_centered_gamma = true;
  GptModel centred(config, backend, 5);
  for (const ParameterEntry& e : plain.parameters().entries()) {
    std::vector<float> values = plain.parameters().read_param(e);
    if (is_norm_weight(e))
      for (float& v : values) v -= 1.0f;
    centred.parameters().write_param(centred.parameters().entry(e.name), values);
  }
  const RefBatch batch = random_batch(config, 2, config.seq_length, 9);
  const LossSum a = plain.forward_backward(micro_batch(batch), {}, 1);
  const LossSum b = centred.forward_backward(micro_batch(batch), {}, 1);
  CHECK(b.loss_sum == Approx(a.loss_sum).epsilon(1e-6));
  for (const ParameterEntry& e : plain.parameters().entries()) {
    INFO(e.name);
    const std::vector<float> ga = plain.parameters().read_grad(e);
    const std::vector<float> gb = centred.parameters().read_grad(centred.parameters().entry(e.name));
    for (std::size_t i = 0; i < ga.size(); ++i) REQUIRE(gb[i] == Approx(ga[i]).epsilon(1e-4).margin(1e-6));
  }

  // A change of the parameters (an optimizer step, a checkpoint load) reaches the next forward.
  for (const ParameterEntry& e : centred.parameters().entries())
    if (is_norm_weight(e)) centred.parameters().write_param(e, std::vector<float>(static_cast<std::size_t>(e.numel()), 0.5f));
  for (const ParameterEntry& e : plain.parameters().entries())
    if (is_norm_weight(e)) plain.parameters().write_param(e, std::vector<float>(static_cast<std::size_t>(e.numel()), 1.5f));
  CHECK(centred.forward_backward(micro_batch(batch), {}, 1).loss_sum ==
        Approx(plain.forward_backward(micro_batch(batch), {}, 1).loss_sum).epsilon(1e-6));
}

}  // namespace

TEST_CASE("layernorm 1p: zero-centred LayerNorm weights, applied as 1 + w", "[model]") {
  check_zero_centred_matches_plain(gpt2_like_config());
}

TEST_CASE("layernorm 1p: zero-centred RMSNorm weights, applied as 1 + w", "[model]") {
  check_zero_centred_matches_plain(llama_like_config());
}

TEST_CASE("layernorm 1p: norm weights start at 0, biases too", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig config = gpt2_like_config();
  config.layernorm_zero_centered_gamma = true;
  GptModel model(config, backend, 5);
  std::size_t norms = 0;
  for (const ParameterEntry& e : model.parameters().entries()) {
    if (e.name.find("layernorm.") == std::string::npos) continue;
    ++norms;
    for (float v : model.parameters().read_param(e)) REQUIRE(v == 0.0f);
  }
  CHECK(norms == 2 * (2 * 2 + 1));  // weight and bias of two norms per layer, and the final norm
}
