// Tensor-parallel layout without communication: the partition metadata of the parameter table,
// sharding and unsharding, the sequence-parallel activation memory, and the mappings of a model
// without a tensor-parallel group. The multi-rank model runs are in tests/dist.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model/activation_memory.hpp"
#include "model/parameter_sharding.hpp"
#include "model/tensor_parallel_mappings.hpp"
#include "model_testing.hpp"

using namespace mgt;

namespace {

// Llama-like with biases and a tied output: every kind of tensor in one table.
GptConfig every_tensor_config() {
  GptConfig c = model_testing::llama_like_config();
  c.add_bias_linear = true;
  c.normalization = Normalization::kLayerNorm;
  return c;
}

std::vector<float> iota_floats(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

}  // namespace

TEST_CASE("GPT parameter table records how tensor parallelism splits each tensor", "[model]") {
  const GptConfig c = every_tensor_config().resolved();
  const ParameterTable table = gpt_parameter_table(c, {2, 1});
  const std::string l = "decoder.layers.0.";
  for (const ParameterEntry& e : table.entries) {
    INFO(e.name);
    CHECK(e.tensor_parallel_replicated == (e.partition_dim == kNotPartitioned));
    // Replicated tensors count on TP rank 0 only.
    CHECK(e.counted_on({2, 0}));
    CHECK(e.counted_on({2, 1}) == !e.tensor_parallel_replicated);
  }
  // Norms and row-parallel biases see sequence-parallel activations; position embeddings do not.
  for (const char* name : {"input_layernorm.weight", "input_layernorm.bias",
                           "pre_mlp_layernorm.weight", "self_attention.linear_proj.bias",
                           "mlp.linear_fc2.bias"}) {
    INFO(name);
    CHECK(table.at(l + name).sequence_parallel);
    CHECK(table.at(l + name).tensor_parallel_replicated);
  }
  CHECK(table.at("decoder.final_layernorm.weight").sequence_parallel);
  for (const char* name : {"self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
                           "self_attention.linear_proj.weight", "mlp.linear_fc1.weight",
                           "mlp.linear_fc1.bias", "mlp.linear_fc2.weight"}) {
    INFO(name);
    CHECK_FALSE(table.at(l + name).sequence_parallel);
    CHECK_FALSE(table.at(l + name).tensor_parallel_replicated);
  }
  // Fused tensors: one query group's (4/2 + 2)·8 = 32 QKV rows stay together; SwiGLU's fc1 is
  // two blocks (gate, up) split separately.
  CHECK(table.at(l + "self_attention.linear_qkv.weight").partition_block == 32);
  CHECK(table.at(l + "self_attention.linear_qkv.bias").partition_block == 32);
  CHECK(table.at(l + "self_attention.linear_qkv.weight").partition_chunks == 1);
  CHECK(table.at(l + "mlp.linear_fc1.weight").partition_chunks == 2);
  CHECK(table.at(l + "mlp.linear_fc1.bias").partition_chunks == 2);
  CHECK(table.at(l + "mlp.linear_fc1.weight").partition_block == 1);
  CHECK(table.at("embedding.word_embeddings.weight").partition_dim == 0);
  CHECK(table.at("embedding.word_embeddings.weight").local_shape == std::vector<int64_t>{16, 16});
}

TEST_CASE("tensor-parallel shards follow Megatron's QKV and SwiGLU layouts", "[model]") {
  const GptConfig c = every_tensor_config().resolved();
  const int64_t tp = 2;
  for (int64_t rank = 0; rank < tp; ++rank) {
    const ParameterTable table = gpt_parameter_table(c, {tp, rank});
    // QKV: rank r holds groups [r·g/tp, (r+1)·g/tp), each q q k v in Megatron's order: with
    // 2 groups, a contiguous half of the rows.
    const ParameterEntry& qkv = table.at("decoder.layers.1.self_attention.linear_qkv.weight");
    const std::vector<float> qkv_whole = iota_floats(qkv.global_numel());
    const std::vector<float> qkv_shard = shard_tensor(qkv, {tp, rank}, qkv_whole);
    const auto half = static_cast<size_t>(qkv.global_numel() / tp);
    const auto first = qkv_whole.begin() + static_cast<long>(static_cast<size_t>(rank) * half);
    CHECK(qkv_shard == std::vector<float>(first, first + static_cast<long>(half)));
    // SwiGLU fc1 [gate (24 rows) ; up (24 rows)]: rank r holds [gate rows r·12… ; up rows r·12…].
    const ParameterEntry& fc1 = table.at("decoder.layers.1.mlp.linear_fc1.bias");
    const std::vector<float> fc1_shard = shard_tensor(fc1, {tp, rank}, iota_floats(48));
    std::vector<float> want;
    for (int64_t i = 0; i < 12; ++i) want.push_back(static_cast<float>(rank * 12 + i));
    for (int64_t i = 0; i < 12; ++i) want.push_back(static_cast<float>(24 + rank * 12 + i));
    CHECK(fc1_shard == want);
    // Row-parallel: columns [r·16, (r+1)·16) of every row of linear_proj [16, 32].
    const ParameterEntry& proj = table.at("decoder.layers.1.self_attention.linear_proj.weight");
    const std::vector<float> proj_shard = shard_tensor(proj, {tp, rank}, iota_floats(16 * 32));
    CHECK(proj_shard[0] == static_cast<float>(rank * 16));
    CHECK(proj_shard[16] == static_cast<float>(32 + rank * 16));
  }
}

TEST_CASE("shard_parameters and unshard_tensor are inverse", "[model]") {
  const GptConfig c = every_tensor_config();
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptParameters whole(c, backend);
  model_testing::randomize_parameters(whole, 3);
  for (const int64_t tp : {2, 4}) {
    if (c.resolved().query_groups() % tp != 0) continue;
    std::vector<std::vector<float>> rebuilt;
    for (const ParameterEntry& e : whole.entries())
      rebuilt.emplace_back(static_cast<size_t>(e.global_numel()), -7.0f);
    for (int64_t rank = 0; rank < tp; ++rank) {
      GptParameters shard(c, backend, {tp, rank});
      shard_parameters(whole, shard);
      for (size_t i = 0; i < shard.entries().size(); ++i) {
        const ParameterEntry& e = shard.entries()[i];
        unshard_tensor(e, {tp, rank}, shard.read_param(e), rebuilt[i]);
      }
    }
    for (size_t i = 0; i < whole.entries().size(); ++i) {
      INFO("TP " << tp << ": " << whole.entries()[i].name);
      CHECK(rebuilt[i] == whole.read_param(whole.entries()[i]));
    }
  }
}

TEST_CASE("sequence-parallel activation memory is counted exactly", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig full = model_testing::llama_like_config();
  full.recompute_granularity = RecomputeGranularity::kFull;
  GptConfig selective = model_testing::gpt2_like_config();
  selective.recompute_granularity = RecomputeGranularity::kSelective;
  // In FP8 too: the norms write their outputs, all-gathered and cast block by block
  // (model/norm_fp8_cast.hpp).
  GptConfig fp8 = model_testing::gpt2_like_config();
  fp8.fp8 = Fp8Recipe{};
  for (const GptConfig& config : {model_testing::gpt2_like_config(), full, selective, fp8}) {
    const ActivationMemory memory(backend, config, {2, 1}, 8, 3, true, false, true);
    const ActivationElements counted =
        ActivationMemory::elements(config, 2, 8, 3, true, false, true);
    CHECK(counted.floats == memory.allocated().floats);
    CHECK(counted.indices == memory.allocated().indices);
    // Layer inputs hold half the sequence.
    CHECK(memory.hidden(0).size() == 4 * 3 * 16);
    CHECK(memory.sequence.gathered.size() == 8 * 3 * 16);
    // The inputs of linear_qkv and linear_fc1 are kept whole, all-gathered.
    CHECK(memory.layer(0).input_norm_output.size() == 8 * 3 * 16);
    CHECK(memory.layer(0).pre_mlp_norm_output.size() == 8 * 3 * 16);
    CHECK(counted.floats <
          ActivationMemory::elements(config, 2, 8, 3, true, false, false).floats + 3 * 8 * 3 * 16);
  }
  CHECK_THROWS_WITH(ActivationMemory(backend, model_testing::gpt2_like_config(), {2, 0}, 7, 1,
                                     true, false, true),
                    Catch::Contains("--sequence-parallel") && Catch::Contains("(7)"));
}

TEST_CASE("tensor-parallel mappings without a group are identities", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const TensorParallelMappings map(backend, nullptr);
  CHECK_FALSE(map.active());
  CHECK(map.size() == 1);
  const std::vector<float> values = iota_floats(6);
  DeviceBuffer a(backend, 6);
  DeviceBuffer b(backend, 6);
  backend.copy_from_host(values, a.view());
  const auto read = [&](const DeviceBuffer& d) {
    std::vector<float> v(6);
    backend.copy_to_host(d.view(), v);
    return v;
  };
  map.copy_to_tensor_region_backward(a.view());
  map.reduce_from_tensor_region_forward(a.view());
  CHECK(read(a) == values);
  backend.fill(b.view(), 0.0f);
  map.gather_from_tensor_region_forward(a.view(), 3, b.view());
  CHECK(read(b) == values);
  backend.fill(b.view(), 0.0f);
  map.scatter_to_tensor_region_forward(a.view(), 2, b.view());
  CHECK(read(b) == values);
  backend.fill(b.view(), 0.0f);
  map.gather_from_sequence_parallel_region_forward(a.view(), b.view());
  CHECK(read(b) == values);
  backend.fill(b.view(), 0.0f);
  map.gather_from_sequence_parallel_region_backward(a.view(), b.view());
  CHECK(read(b) == values);
  backend.fill(b.view(), 0.0f);
  map.reduce_scatter_to_sequence_parallel_region_forward(a.view(), b.view());
  CHECK(read(b) == values);
  CHECK_THROWS_WITH(map.gather_from_sequence_parallel_region_forward(a.view(), b.view().first(5)),
                    Catch::Contains("sequence-parallel all-gather"));
}
