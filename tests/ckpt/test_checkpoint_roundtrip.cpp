#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt_testing.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::ckpt;
using mgt::ckpt_test::pseudo_random_bytes;

namespace {

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

CheckpointMetadata full_metadata() {
  CheckpointMetadata m;
  m.iteration = 1234567;
  m.consumed_train_samples = 9876543210;
  m.consumed_valid_samples = 4242;
  m.num_floating_point_operations_so_far = 3.25e21;
  // Larger than HDF5's 64 KiB compact attribute limit, and not ASCII.
  m.args_json = "{\"num_layers\": 12, \"note\": \"caf\xc3\xa9\", \"pad\": \"" + std::string(200000, 'p') + "\"}";
  m.tokenizer_json = R"({"tokenizer_type": "GPT2BPETokenizer", "padded_vocab_size": 50304})";
  m.scheduler_json = R"({"num_steps": 1234567, "max_lr": 0.0006})";
  m.extra_json["optimizer"] = R"({"step": 1234567, "loss_scale": 65536.0})";
  m.extra_json["rerun_state_machine"] = "";
  m.world = {2, 4, 8, 1, 3, 5};
  return m;
}

}  // namespace

TEST_CASE("checkpoint shard round trip is bit exact", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_roundtrip");
  const auto path = dir + "/mp_rank_01_003.h5";

  // Floats with every bit pattern that matters: NaN payloads, signed zero, denormals, infinities.
  std::vector<float> weights(7 * 33);
  auto random = pseudo_random_bytes(weights.size() * sizeof(float), 1);
  std::memcpy(weights.data(), random.data(), random.size());
  weights[0] = -0.0f;
  weights[1] = std::numeric_limits<float>::denorm_min();
  weights[2] = std::numeric_limits<float>::infinity();
  std::uint32_t nan_bits = 0x7fc12345;
  std::memcpy(&weights[3], &nan_bits, 4);

  std::vector<std::uint16_t> bf16(64 * 48);
  for (std::size_t i = 0; i < bf16.size(); ++i) bf16[i] = static_cast<std::uint16_t>(i * 2654435761u >> 7);
  std::vector<std::int64_t> counters{std::numeric_limits<std::int64_t>::min(), -1, 0, 1,
                                     std::numeric_limits<std::int64_t>::max()};
  auto blob = pseudo_random_bytes(5009, 2);
  std::vector<double> master(16 * 10);
  for (std::size_t i = 0; i < master.size(); ++i) master[i] = 1.0 / static_cast<double>(i + 3);
  std::vector<float> empty;

  const auto meta = full_metadata();
  std::vector<TensorRecord> records{
      TensorRecord::partitioned(model_tensor_path("decoder.layers.0.mlp.linear_fc2.weight"), TensorDType::Float32,
                                {7, 33}, 1, 1, 4),
      TensorRecord::partitioned(model_tensor_path("embedding.word_embeddings.weight"), TensorDType::BFloat16,
                                {64, 48}, 0, 1, 2),
      TensorRecord::whole(rng_state_path("counters"), TensorDType::Int64, {5}),
      TensorRecord::whole(rng_state_path("cuda_rng_state"), TensorDType::UInt8, {5009}),
      TensorRecord::flat_slice(optimizer_tensor_path(OptimizerState::MasterParam, "decoder.final_layernorm.weight"),
                               TensorDType::Float64, {40, 10}, 160, 160),
      TensorRecord::whole(model_tensor_path("decoder.empty"), TensorDType::Float32, {0, 4}),
  };
  std::vector<std::span<const std::byte>> contents{bytes_of(weights), bytes_of(bf16), bytes_of(counters),
                                                   std::span<const std::byte>(blob), bytes_of(master),
                                                   bytes_of(empty)};

  {
    // Small chunks, so every tensor spans several and chunk boundaries fall mid-row.
    ShardWriter writer(path, meta, ShardWriterOptions{.max_chunk_bytes = 1000});
    for (std::size_t i = 0; i < records.size(); ++i) writer.write(records[i], contents[i]);
    writer.close();
  }

  ShardReader reader(path);
  CHECK(reader.metadata() == meta);
  CHECK(reader.metadata().format_version == kFormatVersion);
  // Same records; group by group (in the order groups were first used), in write order within.
  REQUIRE(reader.tensors() == std::vector<TensorRecord>{records[0], records[1], records[5], records[2], records[3],
                                                        records[4]});
  CHECK(reader.tensor_names("model") ==
        std::vector<std::string>{records[0].name, records[1].name, records[5].name});
  CHECK(reader.tensor_names("rng") == std::vector<std::string>{records[2].name, records[3].name});
  CHECK(reader.tensor_names("optimizer/fp32_master_params").size() == 1);
  CHECK(reader.contains(records[3].name));
  CHECK_FALSE(reader.contains("model/nothing"));

  for (std::size_t i = 0; i < records.size(); ++i) {
    INFO(records[i].name);
    std::vector<std::byte> out(records[i].byte_size());
    reader.read(records[i].name, records[i].dtype, records[i].shape, out);
    CHECK(std::equal(out.begin(), out.end(), contents[i].begin(), contents[i].end()));
    auto bytes = reader.read_bytes(records[i].name);
    CHECK(std::equal(bytes.begin(), bytes.end(), contents[i].begin(), contents[i].end()));
  }
  CHECK(reader.stored_chunks(records[1].name).size() > 1);
  CHECK(reader.stored_chunks(records[5].name).empty());
  CHECK_NOTHROW(reader.verify());
}

TEST_CASE("writer refuses inconsistent tensors", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_writer_refuses");
  ShardWriter writer(dir + "/mp_rank_00.h5", CheckpointMetadata{});
  std::vector<float> data(6);
  auto record = TensorRecord::whole("model/w", TensorDType::Float32, {2, 3});
  CHECK_THROWS_WITH(writer.write(record, std::as_bytes(std::span(data)).first(20)),
                    Catch::Matchers::Contains("needs 24 bytes, got 20"));
  writer.write(record, std::as_bytes(std::span(data)));
  CHECK_THROWS_WITH(writer.write(record, std::as_bytes(std::span(data))),
                    Catch::Matchers::Contains("written twice"));
  CHECK_THROWS_AS(writer.write(TensorRecord::whole("meta/w", TensorDType::Float32, {6}),
                               std::as_bytes(std::span(data))),
                  Error);
  writer.close();
  CHECK_THROWS_WITH(writer.write(TensorRecord::whole("model/v", TensorDType::Float32, {6}),
                                 std::as_bytes(std::span(data))),
                    Catch::Matchers::Contains("is closed"));
  ShardReader reader(dir + "/mp_rank_00.h5");
  CHECK(reader.tensors().size() == 1);

  CheckpointMetadata misplaced;
  misplaced.world.tensor_model_parallel_rank = 1;  // of a tensor-parallel size of 1
  CHECK_THROWS_WITH(ShardWriter(dir + "/mp_rank_01.h5", misplaced), Catch::Matchers::Contains("do not fit the sizes"));
}

TEST_CASE("saved iteration is found through the tracker file and loads", "[ckpt]") {
  auto save = test::scratch_dir("ckpt_save_load") + "/run";  // created by the save
  for (std::int64_t iteration : {100, 200}) {
    auto state = ckpt_test::make_fake_state(static_cast<std::uint64_t>(iteration), 3, 10);
    state.metadata.world.tensor_model_parallel_size = 2;
    IterationSave save_op(save, iteration);
    for (int tp = 0; tp < 2; ++tp) {
      state.metadata.world.tensor_model_parallel_rank = tp;
      ShardWriter writer(save_op.staged_path(shard_file_name(ShardId::model_shard(state.metadata.world))),
                         state.metadata);
      ckpt_test::write_fake_state(writer, state);
      writer.close();
    }
    save_op.commit();
    CHECK(save_op.final_dir() == iteration_directory(save, iteration));
  }
  CHECK(latest_iteration(save) == 200);
  auto dir = find_latest_checkpoint_directory(save);
  REQUIRE(dir);
  auto shards = list_shard_files(*dir);
  REQUIRE(shards.size() == 2);
  ShardReader reader(shards[1]);
  CHECK(reader.metadata().world.tensor_model_parallel_rank == 1);
  CHECK(ckpt_test::shard_matches(reader, ckpt_test::make_fake_state(200, 3, 10)));
  // Only the published iterations and the tracker remain.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(save)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"iter_0000100", "iter_0000200", "latest_checkpointed_iteration.txt"});
}
