#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "data/index_job.hpp"
#include "kernels/backend_factory.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/batch_prefetcher.hpp"
#include "train/scheduler_state_json.hpp"
#include "train/train_data.hpp"
#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

TEST_CASE("trainer: prefetched micro-batches follow Megatron's sampler order", "[trainer]") {
  TrainerFixture f("trainer_prefetch");
  const TrainOptions options = f.options({"--train-iters", "4"});
  auto tokenizer = make_tokenizer(options.data.tokenizer);
  const TrainData data = open_train_data(options, *tokenizer);
  REQUIRE(data.train());
  REQUIRE(data.valid());

  BatchPrefetcher::Settings s;
  s.start_sample = 5;  // consumed samples of a resumed run
  s.micro_batch_size = 3;
  s.capacity = 2;
  BatchPrefetcher batches(data.train(), s);
  for (std::int64_t k = 0; k < 4; ++k) {
    const HostMicroBatch b = batches.next();
    CHECK(b.first_sample == 5 + 3 * k);
    REQUIRE(b.tokens.size() == 3 * 32);
    for (std::int64_t j = 0; j < 3; ++j) {
      const GptSample sample = data.train()->get(static_cast<std::size_t>(5 + 3 * k + j));
      CHECK(std::equal(sample.tokens.begin(), sample.tokens.end(), b.tokens.begin() + 32 * j));
      CHECK(std::equal(sample.labels.begin(), sample.labels.end(), b.labels.begin() + 32 * j));
    }
  }

  // Evaluation batches wrap around a split shorter than what is asked of it; training does not.
  const auto size = static_cast<std::int64_t>(data.valid()->size());
  const HostMicroBatch wrapped = read_micro_batch(*data.valid(), size - 1, 2, true, "valid");
  const GptSample first = data.valid()->get(0);
  CHECK(std::equal(first.tokens.begin(), first.tokens.end(), wrapped.tokens.begin() + 32));
  CHECK_THROWS_WITH(read_micro_batch(*data.valid(), size - 1, 2, false, "valid"),
                    Catch::Contains("the valid split ran out of samples"));
}

TEST_CASE("trainer: --eod-mask-loss and --reset-position-ids reach the batches", "[trainer]") {
  TrainerFixture f("trainer_sample_flags");
  const TrainOptions options = f.options({"--train-iters", "4", "--eod-mask-loss", "--reset-position-ids"});
  auto tokenizer = make_tokenizer(options.data.tokenizer);
  const TrainData data = open_train_data(options, *tokenizer);
  bool seen_eod = false;
  for (std::int64_t i = 0; i < 16 && !seen_eod; ++i) {
    const HostMicroBatch b = read_micro_batch(*data.train(), i, 1, false, "train");
    for (std::size_t p = 0; p + 1 < b.tokens.size(); ++p) {
      if (b.tokens[p] != kEod) continue;
      seen_eod = true;
      CHECK(b.loss_mask[p] == 0.0f);
      CHECK(b.position_ids[p + 1] == 0);
    }
  }
  CHECK(seen_eod);
}

TEST_CASE("trainer: AdamW groups skip weight decay for biases and norms, and skip NaN steps", "[trainer]") {
  GptConfig config;
  config.num_layers = 1;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 16;
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptParameters params(config, backend);
  params.initialize(7);
  // Non-zero biases and norm weights, so that decay would show on them.
  for (const ParameterEntry& e : params.entries())
    params.write_param(e, std::vector<float>(static_cast<std::size_t>(e.numel()), 0.5f));
  AdamWOptimizer optimizer(params, AdamWSettings{});

  // Zero gradients: AdamW's update is the decay alone, p · (1 − lr · wd).
  const OptimizerStep step = optimizer.step(0.1, 0.5);
  CHECK(step.applied);
  CHECK(step.grad_norm == 0.0);
  CHECK(optimizer.steps() == 1);
  for (const ParameterEntry& e : params.entries()) {
    INFO(e.name);
    const float expected = e.weight_decay ? 0.5f * (1.0f - 0.1f * 0.5f) : 0.5f;
    CHECK(params.read_param(e)[0] == Approx(expected));
    CHECK(e.weight_decay == (e.global_shape.size() > 1 && !e.name.ends_with(".bias")));
  }

  const std::vector<float> before = params.read_param(params.entries()[0]);
  backend.fill(params.grads().first(1), std::numeric_limits<float>::infinity());
  const OptimizerStep bad = optimizer.step(0.1, 0.5);
  CHECK_FALSE(bad.applied);
  CHECK(std::isinf(bad.grad_norm));
  CHECK(optimizer.steps() == 1);
  CHECK(params.read_param(params.entries()[0]) == before);
}

TEST_CASE("trainer: scheduler state JSON round trip", "[trainer]") {
  LrSchedulerState s{6e-4, 12.5, 4096, "cosine", 100000, 6e-5, 0.01, 0.1, "linear", 200000};
  const LrSchedulerState back = parse_scheduler_state_json(scheduler_state_json(s), "test");
  CHECK(back.max_lr == s.max_lr);
  CHECK(back.lr_warmup_steps == s.lr_warmup_steps);
  CHECK(back.num_steps == s.num_steps);
  CHECK(back.lr_decay_style == s.lr_decay_style);
  CHECK(back.lr_decay_steps == s.lr_decay_steps);
  CHECK(back.min_lr == s.min_lr);
  CHECK(back.start_wd == s.start_wd);
  CHECK(back.end_wd == s.end_wd);
  CHECK(back.wd_incr_style == s.wd_incr_style);
  CHECK(back.wd_incr_steps == s.wd_incr_steps);
  CHECK_THROWS_WITH(parse_scheduler_state_json("{\"max_lr\": 1.0}", "scheduler"),
                    Catch::Contains("scheduler has no 'lr_warmup_steps'"));
}
