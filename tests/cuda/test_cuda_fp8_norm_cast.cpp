// The norms that cast linear_qkv's and linear_fc1's inputs (model/norm_fp8_cast.hpp) on the GPU:
// training steps of bf16 FP8 models, in deterministic mode, give the same losses, gradients,
// parameters and FP8 state to the bit as the same GPU's separate casts, over the rows of a warp
// per row (192) and of a block per row (16) in the norm kernels.
#include <catch2/catch.hpp>

#include <memory>

#include "../model/fp8_norm_cast_testing.hpp"
#include "../model/model_testing.hpp"
#include "backend_pair.hpp"
#include "kernels/backend_factory.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;
using namespace mgt::model_testing;
using namespace mgt::fp8_norm_cast_testing;

namespace {

Run train_on_gpu(const GptConfig& config, int64_t batch_size) {
  const std::unique_ptr<Backend> gpu = make_backend("cuda");
  REQUIRE(gpu->set_matmul_precision(Backend::MatmulPrecision::kBf16));
  REQUIRE(gpu->activation_type() == FloatType::kBf16);
  gpu->set_deterministic(true);
  return train(*gpu, config, batch_size);
}

void compare_on_gpu(GptConfig base) {
  for (const int64_t seq : {64, 8}) {
    INFO("sequence " << seq);
    base.seq_length = seq;
    base.max_position_embeddings = 64;
    const int64_t batch_size = seq == 64 ? 3 : 2;
    check_same(train_on_gpu(fp8_config(base, true), batch_size), train_on_gpu(fp8_config(base, false), batch_size));
  }
}

}  // namespace

TEST_CASE("cuda fp8 norm casts: a LayerNorm model trains to the bit as with the separate casts", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  compare_on_gpu(gpt2_like_config());
}

TEST_CASE("cuda fp8 norm casts: an RMSNorm model trains to the bit as with the separate casts", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  compare_on_gpu(llama_like_config());
}
