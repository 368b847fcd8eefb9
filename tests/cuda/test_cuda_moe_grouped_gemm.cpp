// --moe-grouped-gemm on the GPU: an MoE model whose local experts run as grouped operations (one
// call per projection, the activation once over all rows) against the same model running them
// expert by expert, on the same parameters and batch, in fp32 (checked against the CPU too) and
// bf16 storage (what --moe-grouped-gemm runs with).
#include <catch2/catch.hpp>

#include <cstdio>
#include <vector>

#include "../model/model_testing.hpp"
#include "backend_pair.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;
using namespace mgt::model_testing;

namespace {

struct Pass {
  LossSum loss;
  std::vector<float> grads;
};

Pass train_pass(const GptConfig& config, Backend& backend) {
  GptModel model(config, backend, 7);
  randomize_parameters(model.parameters(), 7);
  backend.scale(model.parameters().params(), 0.2f);
  model.parameters().zero_grads();
  Pass p;
  p.loss = model.forward_backward(micro_batch(random_batch(config, 2, config.seq_length, 11)), {1234, 5}, 1);
  p.grads = read_all_grads(model.parameters());
  return p;
}

}  // namespace

TEST_CASE("cuda moe: grouped GEMM experts match the expert-by-expert loop", "[cuda][moe]") {
  if (skip_without_gpu()) return;
  for (const FloatType storage : {FloatType::kF32, FloatType::kBf16}) {
    BackendPair pair;
    const bool bf16 = storage == FloatType::kBf16;
    if (bf16) REQUIRE(pair.gpu->set_matmul_precision(Backend::MatmulPrecision::kBf16));
    // Sizes of whole 16-byte rows in bf16, so that the grouped GEMM takes every projection. One MoE
    // layer, the first: its routing is the same with either GEMM (the router reads what came
    // before), so that only the experts' rounding differs.
    GptConfig config = llama_like_config();
    config.seq_length = 32;
    config.moe.num_experts = 8;
    config.moe.topk = 2;
    config.moe.ffn_hidden_size = 16;
    config.moe.layer_pattern = {true, false};
    config.moe.aux_loss_coeff = 0.01;
    GptConfig grouped = config;
    grouped.moe.grouped_gemm = true;
    const Pass loop = train_pass(config, *pair.gpu);
    const Pass got = train_pass(grouped, *pair.gpu);
    const double grad_err = relative_error(loop.grads, got.grads);
    std::printf("  cuda moe grouped GEMM (%s storage): loss %.6f vs %.6f expert by expert, gradient rel err %.2e\n",
                float_type_name(storage), got.loss.loss_sum, loop.loss.loss_sum, grad_err);
    CHECK(got.loss.token_count == loop.loss.token_count);
    // The dense model's bounds against the CPU (test_cuda_model.cpp).
    CHECK(got.loss.loss_sum == Approx(loop.loss.loss_sum).epsilon(bf16 ? 1e-2 : 1e-5));
    CHECK(grad_err < (bf16 ? 5e-2 : 1e-4));
    if (!bf16) {
      // fp32: the CPU's loop too, within fp32 rounding.
      const Pass cpu = train_pass(config, *pair.cpu);
      CHECK(got.loss.loss_sum == Approx(cpu.loss.loss_sum).epsilon(1e-5));
      CHECK(relative_error(cpu.grads, got.grads) < 1e-4);
    }
  }
}
