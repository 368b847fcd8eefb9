// LossReduction::kSum (--calculate-per-token-loss): the micro-batch's loss enters the gradient
// undivided; the trainer divides the iteration's gradient by the global batch's tokens.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

TEST_CASE("loss reduction: the plain sum's gradient is tokens x micro-batches times the mean's", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = gpt2_like_config();
  GptModel mean(config, backend, 5);
  GptModel sum(config, backend, 5);
  const RefBatch batch = random_batch(config, 2, config.seq_length, 4);
  const LossSum a = mean.forward_backward(micro_batch(batch), {}, 3);
  const LossSum b = sum.forward_backward(micro_batch(batch), {}, 3, LossReduction::kSum);
  CHECK(a.loss_sum == b.loss_sum);
  CHECK(a.token_count == b.token_count);
  const double factor = a.token_count * 3.0;
  const std::vector<float> ga = read_all_grads(mean.parameters());
  const std::vector<float> gb = read_all_grads(sum.parameters());
  for (std::size_t i = 0; i < ga.size(); ++i) REQUIRE(gb[i] == Approx(ga[i] * factor).epsilon(1e-4).margin(1e-6));
}
