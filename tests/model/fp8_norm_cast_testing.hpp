// Training runs of an FP8 model whose norms cast linear_qkv's and linear_fc1's inputs
// (model/norm_fp8_cast.hpp) against the same model with the separate casts (Fp8Recipe::norm_casts
// off), compared to the bit. Shared by the CPU test (tests/model/test_fp8_norm_cast.cpp) and the
// GPU one (tests/cuda/test_cuda_fp8_norm_cast.cpp).
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "model/gpt_model.hpp"
#include "model_testing.hpp"

namespace mgt::fp8_norm_cast_testing {

using namespace mgt::model_testing;

struct Run {
  std::vector<double> losses;
  double eval_loss = 0.0;
  std::vector<float> params;
  std::vector<float> grads;
  std::vector<Fp8Training::LinearState> fp8_state;
};

inline GptConfig fp8_config(GptConfig config, bool norm_casts) {
  Fp8Recipe recipe;
  recipe.backward_format = Fp8Format::kE5M2;  // hybrid
  recipe.amax_history_len = 4;
  recipe.amax_compute_algo = Fp8AmaxAlgo::kMax;
  recipe.norm_casts = norm_casts;
  config.fp8 = recipe;
  return config;
}

// Three training steps on `backend` (plain SGD on the fp32 parameters, so that the weights' FP8
// copies are made again each step) over micro-batches of `batch_size` sequences, then an
// evaluation pass.
inline Run train(Backend& backend, const GptConfig& config, int64_t batch_size) {
  GptModel model(config, backend, 7);
  GptParameters& params = model.parameters();
  randomize_parameters(params, 7);
  backend.scale(params.params(), 0.3f);
  const RefBatch batch = random_batch(config, batch_size, config.seq_length, 11);
  Run run;
  for (int step = 0; step < 3; ++step) {
    params.zero_grads();
    run.losses.push_back(model.forward_backward(micro_batch(batch), DropoutRng{1234, 5}, 1).loss_sum);
    DeviceBuffer update(backend, params.grads().size());
    backend.copy(params.grads(), update.view());
    backend.scale(update.view(), -0.05f);
    backend.accumulate(params.params(), update.view());
  }
  run.eval_loss = model.forward_only(micro_batch(batch)).loss.loss_sum;
  run.params.resize(static_cast<size_t>(params.params().size()));
  backend.copy_to_host(std::as_const(params).params(), run.params);
  run.grads = read_all_grads(params);
  run.fp8_state = model.fp8()->read_state();
  return run;
}

inline void check_same(const Run& fused, const Run& separate) {
  CHECK(fused.losses == separate.losses);
  CHECK(fused.eval_loss == separate.eval_loss);
  CHECK(fused.params == separate.params);
  CHECK(fused.grads == separate.grads);
  REQUIRE(fused.fp8_state.size() == separate.fp8_state.size());
  for (size_t k = 0; k < fused.fp8_state.size(); ++k) {
    INFO("linear layer " << k);
    CHECK(fused.fp8_state[k].forward_history == separate.fp8_state[k].forward_history);
    CHECK(fused.fp8_state[k].forward_scale == separate.fp8_state[k].forward_scale);
    CHECK(fused.fp8_state[k].backward_history == separate.fp8_state[k].backward_history);
    CHECK(fused.fp8_state[k].backward_scale == separate.fp8_state[k].backward_scale);
  }
}

}  // namespace mgt::fp8_norm_cast_testing
