#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

struct StepResult {
  LossSum loss;
  std::vector<float> grads;
};

StepResult train_step(const GptConfig& config, const RefBatch& batch, const DropoutRng& rng,
                      uint64_t init_seed = 7) {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(config, backend, init_seed);
  randomize_parameters(model.parameters(), 7);
  StepResult r;
  r.loss = model.forward_backward(micro_batch(batch), rng, 1);
  r.grads = read_all_grads(model.parameters());
  return r;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

GptConfig with_dropout(GptConfig c) {
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.2;
  return c;
}

}  // namespace

TEST_CASE("GPT dropout changes the loss and is reproduced by the same seed and micro-step",
          "[model]") {
  for (const GptConfig& base : {gpt2_like_config(), llama_like_config()}) {
    const GptConfig c = with_dropout(base);
    const RefBatch batch = random_batch(c, 2, 8, 5);
    const StepResult off = train_step(base, batch, {42, 3});
    const StepResult on = train_step(c, batch, {42, 3});
    const StepResult again = train_step(c, batch, {42, 3});
    const StepResult next_step = train_step(c, batch, {42, 4});
    const StepResult other_seed = train_step(c, batch, {43, 3});

    CHECK(on.loss.loss_sum != off.loss.loss_sum);
    CHECK(on.loss.loss_sum == again.loss.loss_sum);
    CHECK(bit_identical(on.grads, again.grads));
    CHECK(next_step.loss.loss_sum != on.loss.loss_sum);
    CHECK(other_seed.loss.loss_sum != on.loss.loss_sum);
  }
}

TEST_CASE("GPT evaluation ignores dropout", "[model]") {
  const GptConfig c = with_dropout(gpt2_like_config());
  const RefBatch batch = random_batch(c, 2, 8, 5);
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel with(c, backend, 7);
  GptModel without(gpt2_like_config(), backend, 7);
  CHECK(with.forward_only(micro_batch(batch)).loss.loss_sum ==
        without.forward_only(micro_batch(batch)).loss.loss_sum);
}

TEST_CASE("GPT activation recomputation gives bit-identical gradients", "[model]") {
  for (const GptConfig& base : {gpt2_like_config(), llama_like_config()}) {
    const GptConfig c = with_dropout(base);
    const RefBatch batch = random_batch(c, 2, 8, 6);
    const StepResult plain = train_step(c, batch, {5, 9});

    GptConfig selective = c;
    selective.recompute_granularity = RecomputeGranularity::kSelective;
    const StepResult sel = train_step(selective, batch, {5, 9});
    GptConfig full = c;
    full.recompute_granularity = RecomputeGranularity::kFull;
    const StepResult ful = train_step(full, batch, {5, 9});

    CHECK(sel.loss.loss_sum == plain.loss.loss_sum);
    CHECK(ful.loss.loss_sum == plain.loss.loss_sum);
    CHECK(bit_identical(sel.grads, plain.grads));
    CHECK(bit_identical(ful.grads, plain.grads));
  }
}

TEST_CASE("GPT model reuses its buffers across micro-batch shapes", "[model]") {
  GptConfig c = llama_like_config();
  c.recompute_granularity = RecomputeGranularity::kFull;
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(c, backend, 1);
  randomize_parameters(model.parameters(), 1);
  const RefBatch small = random_batch(c, 1, 4, 1);
  const RefBatch large = random_batch(c, 3, 8, 2);
  const LossSum a = model.forward_backward(micro_batch(small), {}, 1);
  model.forward_backward(micro_batch(large), {}, 1);
  model.parameters().zero_grads();
  const LossSum b = model.forward_backward(micro_batch(small), {}, 1);
  CHECK(a.loss_sum == b.loss_sum);
}
