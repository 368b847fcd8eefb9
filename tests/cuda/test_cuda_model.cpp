// The whole GPT model on the CUDA backend against the CPU: the same parameters and batch give the
// same loss, logits and gradients within fp32 bounds, for the GPT-2 and Llama shapes, with dropout.
#include <catch2/catch.hpp>

#include "../model/model_testing.hpp"
#include "model/kv_cache.hpp"
#include "backend_pair.hpp"
#include "kernels/cuda/cudnn_attention.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;
using namespace mgt::model_testing;

namespace {

// The GPT-2 shape with heads of 64 (cuDNN's attention) and a vocabulary of 512.
GptConfig small_gpt2_config() {
  GptConfig config = gpt2_like_config();
  config.hidden_size = 128;
  config.num_attention_heads = 2;
  config.padded_vocab_size = 512;
  return config;
}

void compare_models(GptConfig config, const char* name, FloatType storage = FloatType::kF32) {
  BackendPair pair;
  const bool bf16 = storage != FloatType::kF32;  // either 2-byte type: bf16's bounds hold fp16 too
  if (bf16) {
    // 2-byte storage on the GPU against the CPU's fp32 kernels on the same storage (the same
    // values rounded at the same points): what differs is the order of sums, moved by rounding.
    REQUIRE(pair.gpu->set_matmul_precision(storage == FloatType::kBf16 ? Backend::MatmulPrecision::kBf16
                                                                       : Backend::MatmulPrecision::kFp16));
    REQUIRE(pair.gpu->activation_type() == storage);
    pair.cpu->set_activation_type(storage);
  }
  // fp32 agrees to rounding; bf16 storage moves the loss and gradients by about 2⁻⁸.
  const double loss_bound = bf16 ? 1e-2 : 1e-5;
  const double grad_bound = bf16 ? 5e-2 : 1e-4;
  const double logit_bound = bf16 ? 2e-2 : 1e-5;
  config.seq_length = 64;
  config.max_position_embeddings = 64;
  config.hidden_dropout = 0.1;
  // Under bf16 attention runs through cuDNN where it applies, whose dropout masks are its own
  // (kernels/cuda/cudnn_attention.hpp): only the fp32 path can match the CPU's masks.
  config.attention_dropout = bf16 && cuda::CudnnAttention::built() ? 0.0 : 0.1;
  GptModel cpu_model(config, *pair.cpu, 7);
  GptModel gpu_model(config, *pair.gpu, 7);
  randomize_parameters(cpu_model.parameters(), 7);
  randomize_parameters(gpu_model.parameters(), 7);
  // Smaller weights than the gradient check's: a deep random network at ±0.9 saturates softmax.
  cpu_model.parameters().backend().scale(cpu_model.parameters().params(), 0.2f);
  gpu_model.parameters().backend().scale(gpu_model.parameters().params(), 0.2f);
  cpu_model.parameters().zero_grads();
  gpu_model.parameters().zero_grads();

  const RefBatch batch = random_batch(config, 3, config.seq_length, 11);
  const DropoutRng rng{1234, 5};
  const LossSum cpu_loss = cpu_model.forward_backward(micro_batch(batch), rng, 1);
  const LossSum gpu_loss = gpu_model.forward_backward(micro_batch(batch), rng, 1);
  INFO(name << ": loss " << cpu_loss.loss_sum << " vs " << gpu_loss.loss_sum);
  CHECK(gpu_loss.token_count == cpu_loss.token_count);
  CHECK(gpu_loss.loss_sum == Approx(cpu_loss.loss_sum).epsilon(loss_bound));
  const double grad_err = relative_error(read_all_grads(cpu_model.parameters()),
                                         read_all_grads(gpu_model.parameters()));
  INFO(name << ": gradient relative error " << grad_err);
  CHECK(grad_err < grad_bound);

  const ForwardOutput cpu_out = cpu_model.forward_only(micro_batch(batch), true, true);
  const ForwardOutput gpu_out = gpu_model.forward_only(micro_batch(batch), true, true);
  const double logit_err = relative_error(cpu_out.logits, gpu_out.logits);
  INFO(name << ": logits relative error " << logit_err);
  CHECK(logit_err < logit_bound);
  std::printf("  cuda model (%s%s): loss %.6f vs %.6f, gradient rel err %.2e, logits rel err %.2e\n",
              name, bf16 ? (storage == FloatType::kBf16 ? ", bf16 storage" : ", fp16 storage") : "", cpu_loss.loss_sum, gpu_loss.loss_sum, grad_err, logit_err);
}

}  // namespace

TEST_CASE("cuda model: GPT-2 shape matches the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  GptConfig config = small_gpt2_config();
  compare_models(config, "gpt2");
}

TEST_CASE("cuda model: Llama shape matches the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  compare_models(llama_like_config(), "llama");
}

TEST_CASE("cuda model: the squared ReLU (--squared-relu, Nemotron-4's MLP) matches the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  GptConfig config = small_gpt2_config();
  config.add_bias_linear = false;
  config.activation = Activation::kSquaredRelu;
  compare_models(config, "gpt2, squared ReLU");
  compare_models(config, "gpt2, squared ReLU", FloatType::kBf16);
}

TEST_CASE("cuda model: query and key norms (--qk-layernorm) match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  compare_models(with_qk_layernorm(llama_like_config()), "llama, q/k RMSNorm");
  GptConfig config = with_qk_layernorm(small_gpt2_config());
  compare_models(config, "gpt2, q/k LayerNorm");
}

TEST_CASE("cuda model: Qwen2-MoE shape (q/k/v biases, a dense layer, a gated shared expert) matches the CPU",
          "[cuda][moe]") {
  if (skip_without_gpu()) return;
  GptConfig config = llama_like_config();
  config.rotary_percent = 1.0;
  config.add_qkv_bias = true;
  config.moe.num_experts = 4;
  config.moe.topk = 2;
  config.moe.pre_softmax = true;
  config.moe.ffn_hidden_size = 12;
  config.moe.layer_pattern = {true, false};
  config.moe.shared_expert_intermediate_size = 10;
  config.moe.shared_expert_gate = true;
  config.moe.aux_loss_coeff = 0.01;
  compare_models(config, "qwen2_moe");
}

TEST_CASE("cuda model: bf16 and fp16 storage stay within bf16 bounds of the fp32 CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  GptConfig config = small_gpt2_config();
  for (const FloatType storage : {FloatType::kBf16, FloatType::kF16}) {
    compare_models(config, "gpt2", storage);
    compare_models(llama_like_config(), "llama", storage);
  }
}

TEST_CASE("cuda model: KV-cached decoding gives the CPU's logits, recorded steps included", "[cuda]") {
  if (skip_without_gpu()) return;
  for (const FloatType storage : {FloatType::kF32, FloatType::kBf16, FloatType::kF16})
  for (GptConfig config : {gpt2_like_config(), llama_like_config()}) {
    BackendPair pair;
    const bool bf16 = storage != FloatType::kF32;  // either 2-byte type: bf16's bound holds fp16 too
    if (bf16) {
      REQUIRE(pair.gpu->set_matmul_precision(storage == FloatType::kBf16 ? Backend::MatmulPrecision::kBf16
                                                                         : Backend::MatmulPrecision::kFp16));
      pair.cpu->set_activation_type(storage);
    }
    config.seq_length = 32;
    config.max_position_embeddings = 40;
    GptModel cpu_model(config, *pair.cpu, 3);
    GptModel gpu_model(config, *pair.gpu, 3);
    randomize_parameters(cpu_model.parameters(), 3);
    randomize_parameters(gpu_model.parameters(), 3);
    const int64_t b = 2;
    const RefBatch batch = random_batch(config, b, 20, 4);
    KvCache cpu_cache(*pair.cpu, cpu_model.config(), b, 24);
    KvCache gpu_cache(*pair.gpu, gpu_model.config(), b, 24);
    // A prompt of 8 tokens, then one token at a time, as generation feeds the model: the second
    // one-token step is recorded and the later ones replay it.
    int64_t done = 0;
    const int64_t vocab = config.padded_vocab_size - 3;  // the padding is never picked
    for (const int64_t n : {8, 1, 1, 1, 1, 1, 1, 1}) {
      std::vector<int64_t> chunk;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = done; j < done + n; ++j) chunk.push_back(batch.tokens[static_cast<size_t>(i * 20 + j)]);
      done += n;
      INFO(float_type_name(storage) << ", after " << done << " tokens");
      if (done < 14) {
        const std::vector<float> want = cpu_model.forward_cached(chunk, n, cpu_cache);
        const std::vector<float> got = gpu_model.forward_cached(chunk, n, gpu_cache);
        CHECK(relative_error(want, got) < (bf16 ? 2e-2 : 1e-5));
      } else {
        const std::vector<int64_t> want = cpu_model.forward_cached_greedy(chunk, n, cpu_cache, vocab);
        const std::vector<int64_t> got = gpu_model.forward_cached_greedy(chunk, n, gpu_cache, vocab);
        if (!bf16) CHECK(want == got);  // 2-byte sums in another order may flip a near tie
        for (const int64_t token : got) CHECK((token >= 0 && token < vocab));
      }
    }
  }
}

TEST_CASE("cuda model: KV-cached decoding of a mixture of experts gives the CPU's logits and tokens", "[cuda][moe]") {
  if (skip_without_gpu()) return;
  // Mixtral's shape: every layer 4 experts, top-2, in fp32 (2-byte sums may route a near tie
  // differently from the CPU).
  GptConfig config = llama_like_config();
  config.rotary_percent = 1.0;
  config.seq_length = 32;
  config.max_position_embeddings = 40;
  config.moe.num_experts = 4;
  config.moe.topk = 2;
  config.moe.ffn_hidden_size = 12;
  config.moe.layer_pattern = {true, true};
  BackendPair pair;
  GptModel cpu_model(config, *pair.cpu, 3);
  GptModel gpu_model(config, *pair.gpu, 3);
  randomize_parameters(cpu_model.parameters(), 3);
  randomize_parameters(gpu_model.parameters(), 3);
  const int64_t b = 2;
  const RefBatch batch = random_batch(config, b, 20, 4);
  KvCache cpu_cache(*pair.cpu, cpu_model.config(), b, 24);
  KvCache gpu_cache(*pair.gpu, gpu_model.config(), b, 24);
  int64_t done = 0;
  const int64_t vocab = config.padded_vocab_size - 3;
  for (const int64_t n : {8, 1, 1, 1, 1, 1, 1, 1}) {
    std::vector<int64_t> chunk;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = done; j < done + n; ++j) chunk.push_back(batch.tokens[static_cast<size_t>(i * 20 + j)]);
    done += n;
    INFO("after " << done << " tokens");
    if (done < 13) {
      const std::vector<float> want = cpu_model.forward_cached(chunk, n, cpu_cache);
      CHECK(relative_error(want, gpu_model.forward_cached(chunk, n, gpu_cache)) < 1e-5);
    } else {
      CHECK(cpu_model.forward_cached_greedy(chunk, n, cpu_cache, vocab) ==
            gpu_model.forward_cached_greedy(chunk, n, gpu_cache, vocab));
    }
  }
}
