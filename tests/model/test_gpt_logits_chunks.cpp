// forward_backward computes the output layer and the loss in chunks of kTrainingLogitsChunk rows
// (with their backward per chunk); a micro-batch of more rows must give the loss and gradients of
// the one-piece head, which the pipeline-stage calls (stage_forward, stage_backward) still run.
#include <catch2/catch.hpp>

#include "kernels/backend_factory.hpp"
#include "model/activation_memory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

TEST_CASE("training logits in chunks give the one-piece head's loss and gradients", "[model]") {
  for (GptConfig config : {gpt2_like_config(), llama_like_config()}) {
    config.seq_length = kTrainingLogitsChunk * 3 / 4 + 37;  // three chunks at batch 3, the last short
    config.max_position_embeddings = config.seq_length;
    config.hidden_dropout = 0.1;
    const RefBatch batch = random_batch(config, 3, config.seq_length, 5);
    REQUIRE(batch.batch * batch.seq > 2 * kTrainingLogitsChunk);
    const DropoutRng rng{77, 1};

    const auto backend_owner = make_backend("cpu");

    Backend& backend = *backend_owner;
    GptModel chunked(config, backend, 9);
    GptModel whole(config, backend, 9);
    randomize_parameters(chunked.parameters(), 9);
    randomize_parameters(whole.parameters(), 9);
    chunked.parameters().zero_grads();
    whole.parameters().zero_grads();

    const LossSum a = chunked.forward_backward(micro_batch(batch), rng, 2);
    const LossSum b = whole.stage_forward(0, micro_batch(batch), rng, 2);
    whole.stage_backward(0);
    CHECK(a.token_count == b.token_count);
    CHECK(a.loss_sum == Approx(b.loss_sum).epsilon(1e-6));
    const std::vector<float> ga = read_all_grads(chunked.parameters());
    const std::vector<float> gb = read_all_grads(whole.parameters());
    double scale = 0.0, diff = 0.0;
    for (size_t i = 0; i < ga.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::abs(gb[i])));
      diff = std::max(diff, static_cast<double>(std::abs(ga[i] - gb[i])));
    }
    REQUIRE(scale > 0.0);
    CHECK(diff / scale < 1e-5);
  }
}
