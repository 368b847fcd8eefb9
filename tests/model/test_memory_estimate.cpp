// The memory estimate made before a model is built: it must count what the model then allocates,
// refuse with the numbers when that cannot fit, and survive absurd sizes without wrapping around.
#include <catch2/catch.hpp>

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
  for (const GptConfig& config : {model_testing::gpt2_like_config(), model_testing::llama_like_config(),
                                  model_testing::openai_gelu_config(), selective, full, moe, moe_full}) {
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
  // Two [8, 2, 2 groups, 8 channels] fp32 tensors per layer.
  CHECK(g.kv_cache_bytes == 2 * 2 * 8 * 2 * 2 * 8 * 4);

  // The layout planner's inputs: a distributed optimizer shards Adam over data-parallel ranks.
  MemoryEstimateRequest sharded;
  sharded.seq_length = 8;
  sharded.layout.data_parallel = 4;
  sharded.layout.distributed_optimizer = true;
  CHECK(estimate_memory(config, sharded).optimizer_bytes == (8 * e.parameters + 3) / 4);
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
  // 1F1B: one micro-batch per stage on the first stage, each through its 2 layers.
  CHECK(estimate_memory(config, r).activation_bytes ==
        4 * ActivationMemory::elements(stage, 1, 8, 2, true, false, false, true, 0).bytes());
  // Two chunks of one layer: 2·(4 − 1) + (2 − 1)·4 warm-up forwards, plus one, in flight.
  r.layout.virtual_pipeline = 2;
  GptConfig chunk = config;
  chunk.num_layers = 1;
  const std::int64_t per_chunk = ActivationMemory::elements(chunk, 1, 8, 2, true, false, false, true, 0).bytes();
  CHECK(estimate_memory(config, r).activation_bytes == 11 * per_chunk);
  r.layout.microbatch_group = 8;
  CHECK(estimate_memory(config, r).activation_bytes == 15 * per_chunk);
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
