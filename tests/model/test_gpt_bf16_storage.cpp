// bf16 storage (Megatron's --bf16: bf16 activations and weight copies, fp32 master weights,
// gradients, norm statistics and losses) on the CPU, whose fp32 kernels then run on converted
// copies: the reference the GPU's native bf16 kernels are compared with. Against the fp32 model the
// loss moves by bf16 rounding (about 2⁻⁸ relative per stored value), never by more.
#include <catch2/catch.hpp>
#include <cstdio>

#include "kernels/backend_factory.hpp"
#include "model/gpt_model.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

double max_relative_error(const std::vector<float>& ref, const std::vector<float>& got) {
  REQUIRE(ref.size() == got.size());
  double scale = 0.0;
  double diff = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(ref[i]) - got[i]));
  }
  REQUIRE(scale > 0.0);
  return diff / scale;
}

void compare_bf16_storage(GptConfig config, const char* name) {
  const auto fp32 = make_backend("cpu");
  const auto bf16 = make_backend("cpu");
  bf16->set_activation_type(FloatType::kBf16);
  config.seq_length = 32;
  config.max_position_embeddings = 32;
  GptModel reference(config, *fp32, 7);
  GptModel model(config, *bf16, 7);
  for (GptModel* m : {&reference, &model}) {
    randomize_parameters(m->parameters(), 7);
    m->parameters().backend().scale(m->parameters().params(), 0.2f);
    m->parameters().zero_grads();
  }
  const RefBatch batch = random_batch(config, 2, config.seq_length, 11);
  const DropoutRng rng{1234, 5};
  const LossSum want = reference.forward_backward(micro_batch(batch), rng, 1);
  const LossSum got = model.forward_backward(micro_batch(batch), rng, 1);
  const double loss_err = std::fabs(got.loss_sum - want.loss_sum) / std::fabs(want.loss_sum);
  const double grad_err = max_relative_error(read_all_grads(reference.parameters()),
                                             read_all_grads(model.parameters()));
  const ForwardOutput want_out = reference.forward_only(micro_batch(batch), true);
  const ForwardOutput got_out = model.forward_only(micro_batch(batch), true);
  const double logit_err = max_relative_error(want_out.logits, got_out.logits);
  std::printf("  bf16 storage (%s): loss rel err %.2e, gradient %.2e, logits %.2e\n", name, loss_err,
              grad_err, logit_err);
  CHECK(got.token_count == want.token_count);
  CHECK(loss_err > 0.0);  // bf16 was really used
  CHECK(loss_err < 1e-2);
  CHECK(grad_err < 5e-2);
  CHECK(logit_err < 2e-2);
  // The master weights and gradients stay fp32; the layers compute with the bf16 copy.
  CHECK(model.parameters().params().type() == FloatType::kF32);
  CHECK(model.parameters().grads().type() == FloatType::kF32);
  CHECK(model.parameters().compute_params().type() == FloatType::kBf16);
}

}  // namespace

TEST_CASE("GPT with bf16 storage stays within bf16 rounding of fp32: GPT-2 shape", "[model]") {
  compare_bf16_storage(gpt2_like_config(), "gpt2");
}

TEST_CASE("GPT with bf16 storage stays within bf16 rounding of fp32: Llama shape", "[model]") {
  compare_bf16_storage(llama_like_config(), "llama");
}

TEST_CASE("GPT with bf16 storage refreshes its weight copy after the weights change", "[model]") {
  const auto bf16 = make_backend("cpu");
  bf16->set_activation_type(FloatType::kBf16);
  GptConfig config = gpt2_like_config();
  GptModel model(config, *bf16, 7);
  const RefBatch batch = random_batch(config, 2, config.seq_length, 11);
  const double before = model.forward_only(micro_batch(batch)).loss.loss_sum;
  bf16->scale(model.parameters().params(), 0.5f);
  const double after = model.forward_only(micro_batch(batch)).loss.loss_sum;
  CHECK(after != before);
}
