// The memory estimate made before a model is built: it must count what the model then allocates,
// refuse with the numbers when that cannot fit, and survive absurd sizes without wrapping around.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/available_memory.hpp"
#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "model/activation_memory.hpp"
#include "model/gpt_parameters.hpp"
#include "model/memory_estimate.hpp"
#include "model/ring_attention.hpp"
#include "model_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("the activation estimate counts every buffer ActivationMemory allocates", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig selective = model_testing::gpt2_like_config();
  selective.recompute_granularity = RecomputeGranularity::kSelective;
  GptConfig full = model_testing::llama_like_config();
  full.recompute_granularity = RecomputeGranularity::kFull;
  // MoE layers (every other one, a shared expert, a padded capacity), and under full recomputation.
  GptConfig moe = model_testing::llama_like_config();
  moe.moe.num_experts = 4;
  moe.moe.layer_pattern = {false, true};
  moe.moe.topk = 2;
  moe.moe.shared_expert_intermediate_size = 8;
  moe.moe.capacity_factor = 1.5;
  moe.moe.pad_to_capacity = true;
  moe.moe.load_balancing = MoeLoadBalancing::kSeqAuxLoss;
  GptConfig moe_full = moe;
  moe_full.recompute_granularity = RecomputeGranularity::kFull;
  // FP8: each expert's rows padded to 16.
  GptConfig moe_fp8 = moe;
  moe_fp8.fp8 = Fp8Recipe{};
  // FP8 dense models, whose norms cast their outputs for linear_qkv and linear_fc1 (neither
  // allocated), and with a first layer outside FP8 (both allocated).
  GptConfig gpt2_fp8 = model_testing::gpt2_like_config();
  gpt2_fp8.fp8 = Fp8Recipe{};
  GptConfig llama_fp8 = model_testing::llama_like_config();
  llama_fp8.fp8 = Fp8Recipe{};
  llama_fp8.fp8->bf16_layers_at_start = 1;
  for (const GptConfig& config : {model_testing::gpt2_like_config(), model_testing::llama_like_config(),
                                  model_testing::openai_gelu_config(), selective, full, moe, moe_full, moe_fp8,
                                  gpt2_fp8, llama_fp8}) {
    for (bool training : {true, false}) {
      for (bool last_position_logits : {false, true}) {
        if (training && last_position_logits) continue;
        for (const int64_t logits_rows : {0, 5, 100}) {
          const ActivationMemory memory(backend, config, {}, 7, 3, training, last_position_logits, false, true,
                                        logits_rows);
          const ActivationElements counted =
              ActivationMemory::elements(config, 1, 7, 3, training, last_position_logits, false, true, logits_rows);
          const ActivationElements allocated = memory.allocated();
          CHECK(counted.floats == allocated.floats);
          CHECK(counted.fp32_floats == allocated.fp32_floats);
          CHECK(counted.indices == allocated.indices);
        }
      }
    }
  }
}

TEST_CASE("the memory estimate covers the parameters, gradients and Adam's moments", "[model]") {
  const GptConfig config = model_testing::llama_like_config();
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptParameters params(config, backend);
  MemoryEstimateRequest r;
  r.seq_length = 8;
  r.micro_batch_size = 2;
  const MemoryEstimate e = estimate_memory(config, r);
  CHECK(e.parameters == config.num_parameters());
  CHECK(e.parameters_per_rank == e.parameters);
  // With --qk-layernorm too: the query and key norms of every layer.
  const GptConfig qk = model_testing::with_qk_layernorm(config);
  CHECK(estimate_memory(qk, r).parameters == qk.num_parameters());
  CHECK(qk.num_parameters() == GptParameters(qk, backend).num_local_elements());
  CHECK(e.parameters == params.num_local_elements());
  CHECK(e.weight_bytes == 4 * e.parameters);
  CHECK(e.gradient_bytes == 4 * e.parameters);
  CHECK(e.optimizer_bytes == 8 * e.parameters);
  const std::int64_t activations =
      ActivationMemory::elements(config, 1, 8, 2, true, false, false, true, kTrainingLogitsChunk).bytes() +
      ActivationMemory::elements(config, 1, 8, 2, false).bytes();
  CHECK(e.activation_bytes == activations);
  CHECK(e.total_bytes == 16 * e.parameters + activations);

  r.use = MemoryUse::kGeneration;
  const MemoryEstimate g = estimate_memory(config, r);
  CHECK(g.optimizer_bytes == 0);
  CHECK(g.gradient_bytes == 0);  // a model loaded for inference holds no gradients
  // Two [8, 2, 2 groups, 8 channels] fp32 tensors per layer.
  CHECK(g.kv_cache_bytes == 2 * 2 * 8 * 2 * 2 * 8 * 4);

  // The layout planner's inputs: a distributed optimizer shards Adam over data-parallel ranks.
  MemoryEstimateRequest sharded;
  sharded.seq_length = 8;
  sharded.layout.data_parallel = 4;
  sharded.layout.distributed_optimizer = true;
  CHECK(estimate_memory(config, sharded).optimizer_bytes == (8 * e.parameters + 3) / 4);
  // --grad-reduce-in-bf16: a bf16 copy of the gradients beside them.
  sharded.bf16_gradient_copy = true;
  CHECK(estimate_memory(config, sharded).gradient_bytes == 6 * e.parameters);
  ParallelLayout tp2;
  tp2.tensor_parallel = 2;
  CHECK(parameters_per_rank(config, tp2) < e.parameters);
  CHECK(parameters_per_rank(config, tp2) > e.parameters / 2);
}

TEST_CASE("the interleaved schedule's activation estimate: its warm-up's chunks in flight", "[model]") {
  GptConfig config = model_testing::llama_like_config();
  config.num_layers = 8;
  MemoryEstimateRequest r;
  r.seq_length = 8;
  r.micro_batch_size = 2;
  r.evaluation_too = false;
  r.layout.pipeline_parallel = 4;
  GptConfig stage = config;
  stage.num_layers = 2;
  // 1F1B: four micro-batches in flight on the first stage, each through its 2 layers, without the
  // output layer; one on the last stage, with it.
  const std::int64_t first = ActivationMemory::elements(stage, 1, 8, 2, true, false, false, false, 0).bytes();
  const std::int64_t last = ActivationMemory::elements(stage, 1, 8, 2, true, false, false, true, 0).bytes();
  CHECK(estimate_memory(config, r).activation_bytes == std::max(4 * first, last));
  // No more in flight than the step's micro-batches.
  r.num_microbatches = 2;
  CHECK(estimate_memory(config, r).activation_bytes == std::max(2 * first, last));
  r.num_microbatches = 0;
  // Two chunks of one layer: 2·(4 − 1) + (2 − 1)·4 warm-up forwards, plus one, in flight.
  r.layout.virtual_pipeline = 2;
  GptConfig chunk = config;
  chunk.num_layers = 1;
  const std::int64_t per_chunk = ActivationMemory::elements(chunk, 1, 8, 2, true, false, false, false, 0).bytes();
  const std::int64_t head_chunk = ActivationMemory::elements(chunk, 1, 8, 2, true, false, false, true, 0).bytes();
  CHECK(estimate_memory(config, r).activation_bytes == std::max(11 * per_chunk, head_chunk));
  r.layout.microbatch_group = 8;
  CHECK(estimate_memory(config, r).activation_bytes == std::max(15 * per_chunk, head_chunk));
}

// Context parallelism: each rank's training activations are those of seq / CP tokens, plus the
// ring attention's buffers; evaluation keeps whole sequences; the distributed optimizer shards
// over data-parallel x context-parallel ranks.
TEST_CASE("the memory estimate accounts for context parallelism", "[model][context-parallel]") {
  const GptConfig config = model_testing::llama_like_config();
  MemoryEstimateRequest r;
  r.seq_length = 16;
  r.micro_batch_size = 2;
  r.layout.context_parallel = 2;
  r.layout.data_parallel = 2;
  r.layout.distributed_optimizer = true;
  const MemoryEstimate e = estimate_memory(config, r);
  AttentionShape local{2, 8, 8, 4, 2, 8, SeqLayout::kSeqMajor};
  const std::int64_t activations =
      ActivationMemory::elements(config, 1, 8, 2, true, false, false, true, kTrainingLogitsChunk).bytes() +
      RingAttention::scratch_elements(local) * 4 + ActivationMemory::elements(config, 1, 16, 2, false).bytes();
  CHECK(e.activation_bytes == activations);
  CHECK(e.optimizer_bytes == (8 * e.parameters + 3) / 4);
  r.layout.context_parallel = 1;
  CHECK(estimate_memory(config, r).activation_bytes > e.activation_bytes);
}

TEST_CASE("a model too large for the memory is refused with the estimate and what is available", "[model]") {
  GptConfig config = model_testing::gpt2_like_config();
  MemoryEstimateRequest r;
  r.seq_length = 8;
  const MemoryEstimate e = estimate_memory(config, r);
  CHECK_NOTHROW(require_memory(e, AvailableMemory{e.total_bytes, "test"}, "training this model"));
  CHECK_NOTHROW(require_memory(e, std::nullopt, "training this model"));
  const std::string message =
      error_of([&] { require_memory(e, AvailableMemory{e.total_bytes - 1, "the test's limit"}, "training this model"); });
  CHECK_THAT(message, Catch::StartsWith("training this model needs an estimated "));
  CHECK_THAT(message, Catch::Contains(std::to_string(e.parameters) + " parameters (weights "));
  CHECK_THAT(message, Catch::Contains("is available (the test's limit)"));

  // --hidden-size 1000000000: counted, not allocated, and refused.
  config.hidden_size = 1000000000;
  config.num_attention_heads = 1;
  const std::string huge = error_of([&] {
    check_memory(config, r, AvailableMemory{std::int64_t{1} << 40, "1 TiB"}, "training this model");
  });
  CHECK_THAT(huge, Catch::Contains("needs an estimated") && Catch::Contains("EiB"));

  // Sizes whose product overflows 64 bits are refused, not wrapped around to something small.
  config = model_testing::gpt2_like_config();
  config.num_layers = 2147483647;
  config.hidden_size = 2147483647;
  config.num_attention_heads = 1;
  CHECK_THAT(error_of([&] { config.num_parameters(); }), Catch::Contains("overflow"));
  CHECK_THAT(error_of([&] { check_memory(config, r, std::nullopt, "converting m"); }),
             Catch::StartsWith("converting m needs an estimated more than 8.0 EiB of memory per rank for more than"));
}

TEST_CASE("available memory: MemAvailable, lowered by a cgroup's limit", "[core]") {
  const std::string root = test::scratch_dir("available_memory");
  write(root + "/proc/meminfo", "MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n");
  write(root + "/proc/self/cgroup", "0::/job/step\n");
  std::optional<AvailableMemory> a = available_host_memory(root);
  REQUIRE(a);
  CHECK(a->bytes == 8000000LL * 1024);
  CHECK(a->source == "MemAvailable in /proc/meminfo");

  write(root + "/sys/fs/cgroup/job/memory.max", "1073741824\n");
  write(root + "/sys/fs/cgroup/job/memory.current", "73741824\n");
  write(root + "/sys/fs/cgroup/job/step/memory.max", "max\n");
  a = available_host_memory(root);
  REQUIRE(a);
  CHECK(a->bytes == 1000000000);
  CHECK(a->source == "cgroup memory.max of /job");

  write(root + "/proc/self/cgroup", "4:memory:/slurm\n");
  write(root + "/sys/fs/cgroup/memory/slurm/memory.limit_in_bytes", "2000000000\n");
  write(root + "/sys/fs/cgroup/memory/slurm/memory.usage_in_bytes", "500000000\n");
  a = available_host_memory(root);
  REQUIRE(a);
  CHECK(a->bytes == 1500000000);
  CHECK(a->source == "cgroup memory.limit_in_bytes of /slurm");

  CHECK_FALSE(available_host_memory(root + "/nothing-here"));
  CHECK(format_bytes(512) == "512 bytes");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(3.0 * (1LL << 30)) == "3.0 GiB");
}

TEST_CASE("the parameter count of an MoE model is its table's", "[model][moe]") {
  GptConfig config = model_testing::llama_like_config();
  config.moe.num_experts = 4;
  config.moe.layer_pattern = {true, false};
  config.moe.ffn_hidden_size = 12;
  config.moe.shared_expert_intermediate_size = 8;
  int64_t counted = 0;
  for (const ParameterEntry& e : gpt_parameter_table(config).entries) counted += e.global_numel();
  CHECK(config.num_parameters() == counted);
}

namespace {

// Megatron's Llama 3 8B shape as BENCHMARKS.md's 4-GPU runs give it: NullTokenizer's 128,257
// tokens padded to 128,512.
GptConfig llama3_8b_config() {
  GptConfig c;
  c.num_layers = 32;
  c.hidden_size = 4096;
  c.ffn_hidden_size = 14336;
  c.num_attention_heads = 32;
  c.group_query_attention = true;
  c.num_query_groups = 8;
  c.kv_channels = 128;
  c.seq_length = 8192;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.normalization = Normalization::kRmsNorm;
  c.activation = Activation::kSwiglu;
  c.add_bias_linear = false;
  c.untie_embeddings_and_output_weights = true;
  c.padded_vocab_size = 128512;
  return c;
}

// A --bf16 run on GPUs: 2-byte activations and compute copy beside the fp32 parameters, global
// batch 8 of micro-batch 1, no validation (--eval-iters 0).
MemoryEstimateRequest bf16_gpu_request(std::int64_t seq, std::int64_t micro_batch, std::int64_t microbatches) {
  MemoryEstimateRequest r;
  r.seq_length = seq;
  r.micro_batch_size = micro_batch;
  r.num_microbatches = microbatches;
  r.bytes_per_weight = 2;
  r.master_weights = true;
  r.cuda_workspaces = true;
  r.evaluation_too = false;
  return r;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

// The figures below are worked out by hand from what the CUDA run allocates (ActivationMemory's
// buffers in bf16 but their statistics in fp32; fp32 parameters and gradients whole on every
// rank beside the bf16 compute copy; Adam's two fp32 moments), and set beside BENCHMARKS.md's
// measured peaks.
TEST_CASE("the memory estimate of the Llama 3 8B shape on 4 GPUs, by hand", "[model][planner]") {
  const GptConfig config = llama3_8b_config();
  const std::int64_t h = 4096, k = 128, t = 8192;

  SECTION("TP=4 with sequence parallelism") {
    MemoryEstimateRequest r = bf16_gpu_request(8192, 1, 8);
    r.layout.tensor_parallel = 4;
    r.layout.sequence_parallel = true;
    const MemoryEstimate e = estimate_memory(config, r);
    // Per layer: qkv 4096·6144/4, proj 4096²/4, fc1 4096·28672/4, fc2 14336·4096/4, two norms;
    // the two vocabulary shards and the final norm.
    const std::int64_t layer = 6291456 + 4194304 + 29360128 + 14680064 + 2 * h;
    const std::int64_t p = 32 * layer + 2 * (128512 / 4) * h + h;
    CHECK(e.parameters_per_rank == p);
    CHECK(e.weight_bytes == 2 * p);
    CHECK(e.master_weight_bytes == 4 * p);
    CHECK(e.gradient_bytes == 4 * p);
    CHECK(e.optimizer_bytes == 8 * p);
    // 8 heads and 2 query groups per rank, FFN 3584 (fc1 7168) per rank, 2048 tokens per rank
    // outside the tensor-parallel regions.
    const std::int64_t tl = t / 4, heads = 8, groups = 2, ffn = 3584, fc1 = 7168, vocab = 128512 / 4;
    const std::int64_t layer_bf16 = 2 * t * h + tl * h + 2 * t * heads * k + 2 * t * groups * k + t * fc1 + t * ffn;
    const std::int64_t layer_fp32 = 2 * tl + heads * t;  // RMSNorm rstd twice, softmax statistics
    const std::int64_t scratch = t * (heads + 2 * groups) * k + 2 * tl * h + 3 * t * h +
                                 2 * t * heads * k + 2 * t * groups * k + t * ffn + t * fc1 + tl * h;
    const std::int64_t bf16 = 33 * tl * h + 32 * layer_bf16 + scratch + tl * h + t * vocab;
    const std::int64_t fp32 = t + 32 * layer_fp32 + t + tl + 3 * t + 3 * t * 4;
    CHECK(e.activation_bytes == 2 * bf16 + 4 * fp32 + 8 * 3 * t);
    // cuBLASLt's 32 MiB and cuDNN attention's backward scratch: fp32 statistics and dQ.
    CHECK(e.workspace_bytes == (32 << 20) + 4 * heads * t + 4 * t * heads * k);
    CHECK(e.total_bytes == 18 * p + e.activation_bytes + e.workspace_bytes);
    CHECK(e.total_bytes == 49629151232);
    // BENCHMARKS.md: 52,411 MiB by nvidia-smi, which adds the CUDA context, NCCL's buffers and the
    // pool's unused reserve to what the allocator hands out.
    CHECK(static_cast<double>(e.total_bytes) / kMiB > 0.9 * 52411);
    CHECK(static_cast<double>(e.total_bytes) / kMiB < 52411);
  }

  SECTION("TP=2 × PP=2 with sequence parallelism: the first stage's two micro-batches") {
    MemoryEstimateRequest r = bf16_gpu_request(8192, 1, 8);
    r.layout.tensor_parallel = 2;
    r.layout.pipeline_parallel = 2;
    r.layout.sequence_parallel = true;
    const MemoryEstimate e = estimate_memory(config, r);
    // 16 layers and a vocabulary shard on either stage; the final norm on the last.
    const std::int64_t layer = 2 * (6291456 + 4194304 + 29360128 + 14680064) + 2 * h;
    const std::int64_t p = 16 * layer + (128512 / 2) * h + h;
    CHECK(e.parameters_per_rank == p);
    const std::int64_t tl = t / 2, heads = 16, groups = 4, ffn = 7168, fc1 = 14336;
    const std::int64_t layer_bf16 = 2 * t * h + tl * h + 2 * t * heads * k + 2 * t * groups * k + t * fc1 + t * ffn;
    const std::int64_t layer_fp32 = 2 * tl + heads * t;
    const std::int64_t scratch = t * (heads + 2 * groups) * k + 2 * tl * h + 3 * t * h +
                                 2 * t * heads * k + 2 * t * groups * k + t * ffn + t * fc1 + tl * h;
    const std::int64_t slot = 2 * (17 * tl * h + 16 * layer_bf16 + scratch) + 4 * (t + 16 * layer_fp32) + 8 * 3 * t;
    CHECK(e.activation_bytes == 2 * slot);  // 1F1B's first stage holds P = 2 micro-batches
    CHECK(e.workspace_bytes == (32 << 20) + 4 * heads * t + 4 * t * heads * k);
    CHECK(e.total_bytes == 58311581696);
    // BENCHMARKS.md: 60,793 MiB by nvidia-smi (the estimate was 78.9 GiB before it counted bf16
    // activations, sequence parallelism and the stages' own buffers).
    CHECK(static_cast<double>(e.total_bytes) / kMiB > 0.9 * 60793);
    CHECK(static_cast<double>(e.total_bytes) / kMiB < 60793);

    // FP8: the four linears of each layer cast to FP8 in rows and in columns.
    GptConfig fp8 = config;
    fp8.fp8 = Fp8Recipe{};
    const MemoryEstimate f = estimate_memory(fp8, r);
    CHECK(f.fp8_weight_bytes == std::int64_t{2} * 16 * 2 * (6291456 + 4194304 + 29360128 + 14680064));
    CHECK(static_cast<double>(f.total_bytes) / kMiB > 0.9 * 64473);  // nvidia-smi's 64,473 MiB
  }
}

TEST_CASE("the memory estimate of GPT-2 124M and GPT 1.3B on one GPU, against the allocator's peak",
          "[model][planner]") {
  GptConfig gpt2 = model_testing::gpt2_like_config();
  gpt2.num_layers = 12;
  gpt2.hidden_size = 768;
  gpt2.num_attention_heads = 12;
  gpt2.kv_channels = 64;
  gpt2.ffn_hidden_size = 3072;
  gpt2.seq_length = 1024;
  gpt2.max_position_embeddings = 1024;
  gpt2.padded_vocab_size = 50304;
  gpt2.hidden_dropout = gpt2.attention_dropout = 0.0;
  const std::int64_t h = 768, t = 16 * 1024;
  const MemoryEstimate e = estimate_memory(gpt2, bf16_gpu_request(1024, 16, 1));
  // Tied embeddings, learned positions, biases, LayerNorm.
  const std::int64_t p = 12 * (4 * h + 3 * h * h + 3 * h + h * h + h + 4 * h * h + 4 * h + 4 * h * h + h) +
                         50304 * h + 1024 * h + 2 * h;
  CHECK(e.parameters_per_rank == p);
  // Per layer: two norm outputs, residual, q/k/v, context, fc1 and GELU outputs in bf16; two
  // LayerNorms' mean and rstd and the softmax statistics in fp32. The head: 4096 rows of logits.
  const std::int64_t layer_bf16 = 3 * t * h + 4 * t * h + 2 * t * 3072;
  const std::int64_t layer_fp32 = 4 * t + 12 * t;
  const std::int64_t scratch = 3 * t * h + 2 * t * h + 4 * t * h + 2 * t * 3072 + t * h;
  const std::int64_t bf16 = 13 * t * h + 12 * layer_bf16 + scratch + t * h + 4096 * 50304;
  const std::int64_t fp32 = t + 12 * layer_fp32 + t + 2 * t + 3 * t;
  CHECK(e.activation_bytes == 2 * bf16 + 4 * fp32 + 8 * 3 * t);
  // BENCHMARKS.md: max allocated 7,711 MiB at micro-batch 16, 5,137 at 8, 12,861 at 32: within 1%.
  const auto within = [](const MemoryEstimate& m, double measured) {
    const double mib = static_cast<double>(m.total_bytes) / kMiB;
    return mib > 0.99 * measured && mib < 1.01 * measured;
  };
  CHECK(within(e, 7711));
  CHECK(within(estimate_memory(gpt2, bf16_gpu_request(1024, 8, 1)), 5137));
  CHECK(within(estimate_memory(gpt2, bf16_gpu_request(1024, 32, 1)), 12861));

  GptConfig large = gpt2;  // GPT 1.3B: 24 layers of 2048, sequence 2048: 36,020 MiB at micro-batch 4
  large.num_layers = 24;
  large.hidden_size = 2048;
  large.num_attention_heads = 16;
  large.kv_channels = 128;
  large.ffn_hidden_size = 8192;
  large.seq_length = large.max_position_embeddings = 2048;
  CHECK(within(estimate_memory(large, bf16_gpu_request(2048, 4, 1)), 36020));
  // With FP8 (the GELU's output not kept, the linear layers' inputs kept transposed in FP8): the
  // norms casting their outputs for linear_qkv and linear_fc1 themselves by default
  // (model/norm_fp8_cast.hpp), 36,598 MiB measured; with --no-fp8-norm-casts, the norms writing
  // their bf16 outputs for the linear layers to cast, 38,134 MiB: both bf16 outputs [s·b, h] kept
  // in each of the 24 layers.
  large.fp8 = Fp8Recipe{};
  large.activation = Activation::kOpenaiGelu;  // mgt-train's default, Megatron's fused bias-GELU
  const MemoryEstimate fused = estimate_memory(large, bf16_gpu_request(2048, 4, 1));
  INFO("FP8 estimate " << static_cast<double>(fused.total_bytes) / kMiB << " MiB");
  CHECK(within(fused, 36598));
  GptConfig separate_casts = large;
  separate_casts.fp8->norm_casts = false;
  const MemoryEstimate separate = estimate_memory(separate_casts, bf16_gpu_request(2048, 4, 1));
  CHECK(within(separate, 38134));
  CHECK(separate.total_bytes - fused.total_bytes == std::int64_t{24} * 2 * (4 * 2048) * 2048 * 2);
}

TEST_CASE("the FP8 weight copies of an MoE model: attention, the shared experts and the local experts",
          "[model][moe]") {
  GptConfig config = model_testing::llama_like_config();
  config.moe.num_experts = 4;
  config.moe.layer_pattern = {true, false};
  config.moe.ffn_hidden_size = 12;
  config.moe.shared_expert_intermediate_size = 8;
  const MemoryEstimateRequest r = bf16_gpu_request(config.seq_length, 1, 1);
  const MemoryEstimate bf16 = estimate_memory(config, r);
  CHECK(bf16.fp8_weight_bytes == 0);
  config.fp8 = Fp8Recipe{};
  // Each FP8 linear's weight twice (rows and columns), one byte an element: those of the table
  // but the norms', the router's, the embedding's and the output layer's.
  std::int64_t weights = 0;
  for (const ParameterEntry& e : gpt_parameter_table(config).entries)
    if (e.name.find("linear_") != std::string::npos) weights += e.numel();
  CHECK(estimate_memory(config, r).fp8_weight_bytes == 2 * weights);
}

TEST_CASE("the memory estimate counts an MoE model's experts on each rank", "[model][moe][planner]") {
  GptConfig c = model_testing::llama_like_config();
  c.moe.num_experts = 8;
  c.moe.layer_pattern = {false, true};
  c.moe.ffn_hidden_size = 24;
  c.moe.shared_expert_intermediate_size = 16;
  c.moe.shared_expert_gate = true;
  // One rank holds the whole model: its parameter count.
  CHECK(parameters_per_rank(c, ParallelLayout{}) == c.num_parameters());
  // Expert parallelism: each rank half of the experts (SwiGLU fc1 [2·24, h] and fc2 [h, 24]).
  const std::int64_t h = c.hidden_size;
  const std::int64_t expert = 3 * 24 * h;
  GptConfig ep2 = c;
  ep2.moe.expert_model_parallel_size = 2;
  CHECK(parameters_per_rank(ep2, ParallelLayout{}) == c.num_parameters() - 4 * expert);
  // Tensor parallelism splits the experts with the other layers unless they are kept whole
  // (--expert-tensor-parallel-size 1): the experts' share of a rank doubles.
  ParallelLayout tp2;
  tp2.tensor_parallel = 2;
  GptConfig whole = ep2;
  whole.moe.expert_tensor_parallel_size = 1;
  CHECK(parameters_per_rank(whole, tp2) - parameters_per_rank(ep2, tp2) == 4 * expert / 2);
  // The distributed optimizer over DP=2 with EP=2: the dense parameters' moments sharded over
  // both ranks, the experts' over their expert-data-parallel group of one.
  MemoryEstimateRequest r;
  r.seq_length = 16;
  r.micro_batch_size = 1;
  r.layout.data_parallel = 2;
  r.layout.distributed_optimizer = true;
  const MemoryEstimate e = estimate_memory(ep2, r);
  const std::int64_t experts = 4 * expert;
  CHECK(e.optimizer_bytes == (e.parameters_per_rank - experts) * 8 / 2 + experts * 8);
  // The model's size, as --dry-run prints it, counts every expert.
  CHECK(e.parameters == c.num_parameters());
  CHECK(estimate_memory(whole, r).parameters == c.num_parameters());
}

TEST_CASE("the memory estimate of a Mixtral-style model on one GPU, against the allocator's peak",
          "[model][moe][planner]") {
  // tools/gpu/moe_speed.sh's model: 16 layers of 2048, GQA 8, sequence 4096, 8 experts of ffn 5632
  // top-2, untied embeddings of NullTokenizer's 32,001 tokens padded to 32,128; micro-batch 1,
  // global batch 32, bf16. The Llama layer of llama3_8b_config at these sizes.
  GptConfig c = llama3_8b_config();
  c.num_layers = 16;
  c.hidden_size = 2048;
  c.ffn_hidden_size = 5632;
  c.num_attention_heads = 16;
  c.seq_length = 4096;
  c.padded_vocab_size = 32128;
  c.moe.num_experts = 8;
  c.moe.topk = 2;
  c.moe.ffn_hidden_size = 5632;
  c.moe.layer_pattern.assign(16, true);
  c.moe.dispatcher = MoeDispatcher::kAlltoall;
  c.moe.grouped_gemm = true;
  const MemoryEstimate e = estimate_memory(c, bf16_gpu_request(4096, 1, 32));
  CHECK(e.parameters_per_rank == c.num_parameters());
  INFO("estimate " << static_cast<double>(e.total_bytes) / kMiB << " MiB");
  // BENCHMARKS.md: max allocated 91,907 MiB (moe_speed.sh, binaries 44791a3).
  CHECK(static_cast<double>(e.total_bytes) / kMiB > 0.99 * 91907);
  CHECK(static_cast<double>(e.total_bytes) / kMiB < 1.01 * 91907);
}
