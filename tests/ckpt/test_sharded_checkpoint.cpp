// Checkpoints written piece by piece at one parallel layout and read whole at any other: the
// stored pieces cut tensors exactly as the model's own tensor-parallel sharding does (SwiGLU's
// two-chunk fc1 and the grouped QKV included), and a checkpoint written at TP=2 x PP=2 with
// distributed-optimizer shards reads back the same whole tensors, bit for bit.
#include <catch2/catch.hpp>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "../test_paths.hpp"
#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/layout_shard_writers.hpp"
#include "ckpt/parameter_piece_record.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt/tensor_pieces.hpp"
#include "model/parameter_sharding.hpp"
#include "model/parameter_table.hpp"

using namespace mgt;
using namespace mgt::model_testing;
namespace fs = std::filesystem;

namespace {

std::vector<float> counting(std::int64_t n, float start) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE("stored pieces cut tensors as the model's tensor-parallel shards do", "[ckpt]") {
  for (const GptConfig& config : {gpt2_like_config(), llama_like_config()}) {
    const int tp_size = 2;
    const ParameterTable whole = gpt_parameter_table(config);
    for (int rank = 0; rank < tp_size; ++rank) {
      const TensorParallelRank tp{tp_size, rank};
      for (const ParameterEntry& e : gpt_parameter_table(config, tp).entries) {
        const std::vector<float> values = counting(e.global_numel(), 0.5f);
        const ckpt::TensorRecord record = ckpt::parameter_piece_record("model/" + e.name, e, tp);
        std::vector<float> piece(static_cast<std::size_t>(e.numel()));
        ckpt::cut_piece(record.partition, e.global_shape, sizeof(float), std::as_bytes(std::span<const float>(values)),
                        std::as_writable_bytes(std::span<float>(piece)));
        INFO(e.name);
        CHECK(piece == shard_tensor(e, tp, values));
        std::vector<float> back(values.size(), -1.0f);
        if (record.partition.dim < 0) continue;
        ckpt::place_piece(record.partition, e.global_shape, sizeof(float), std::as_bytes(std::span<const float>(piece)),
                          std::as_writable_bytes(std::span<float>(back)));
        for (std::int64_t i = 0; i < e.numel(); ++i)
          CHECK(back[static_cast<std::size_t>(e.global_index(i, tp))] == piece[static_cast<std::size_t>(i)]);
      }
    }
    CHECK(!whole.entries.empty());
  }
}

TEST_CASE("a checkpoint written at TP=2 x PP=2 with optimizer shards reads back whole", "[ckpt]") {
  const fs::path dir = mgt::test::scratch_dir("sharded_checkpoint");
  const GptConfig config = llama_like_config().resolved();
  const ParameterTable table = gpt_parameter_table(config);
  ckpt::CheckpointMetadata meta;
  meta.iteration = 7;
  const ckpt::TargetLayout layout{2, 2, 2, true};
  {
    ckpt::LayoutShardWriters writers(dir.string(), config, layout, meta);
    float start = 0.0f;
    for (const ParameterEntry& e : table.entries) {
      const std::vector<float> weights = counting(e.global_numel(), start);
      const std::vector<float> moment = counting(e.global_numel(), -start);
      start += 1000.0f;
      writers.write(ckpt::model_tensor_path(e.name), ckpt::TensorDType::Float32, e.global_shape,
                    std::as_bytes(std::span<const float>(weights)));
      writers.write(ckpt::optimizer_tensor_path(ckpt::OptimizerState::ExpAvg, e.name), ckpt::TensorDType::Float32,
                    e.global_shape, std::as_bytes(std::span<const float>(moment)));
    }
    writers.close();
  }
  // Four model shards and two optimizer shards for each of them.
  CHECK(ckpt::list_shard_files(dir.string()).size() == 4 + 8);

  const ckpt::ShardedCheckpoint checkpoint(dir.string());
  CHECK(checkpoint.metadata().iteration == 7);
  CHECK(checkpoint.metadata().world.tensor_model_parallel_size == 2);
  CHECK(checkpoint.metadata().world.pipeline_model_parallel_size == 2);
  float start = 0.0f;
  for (const ParameterEntry& e : table.entries) {
    INFO(e.name);
    std::vector<float> read(static_cast<std::size_t>(e.global_numel()));
    checkpoint.read_whole(ckpt::model_tensor_path(e.name), ckpt::TensorDType::Float32, e.global_shape,
                          std::as_writable_bytes(std::span<float>(read)));
    CHECK(read == counting(e.global_numel(), start));
    checkpoint.read_whole(ckpt::optimizer_tensor_path(ckpt::OptimizerState::ExpAvg, e.name),
                          ckpt::TensorDType::Float32, e.global_shape, std::as_writable_bytes(std::span<float>(read)));
    CHECK(read == counting(e.global_numel(), -start));
    start += 1000.0f;
  }
  CHECK(ckpt::iteration_directory_problem(dir.string(), 7).empty());
  // A lost optimizer shard makes the iteration incomplete, and reading names it.
  fs::remove(dir / "mp_rank_01_001_dp_001.h5");
  CHECK_THAT(ckpt::iteration_directory_problem(dir.string(), 7), Catch::Contains("7 optimizer shards of 8"));
  const ckpt::ShardedCheckpoint damaged(dir.string());
  std::vector<float> read(static_cast<std::size_t>(table.entries.back().global_numel()));
  CHECK_THROWS_WITH(damaged.read_whole(ckpt::optimizer_tensor_path(ckpt::OptimizerState::ExpAvg, table.entries.back().name),
                                       ckpt::TensorDType::Float32, table.entries.back().global_shape,
                                       std::as_writable_bytes(std::span<float>(read))),
                    Catch::Contains("output_layer.weight") && Catch::Contains("shard file is missing"));
  fs::remove_all(dir);
}
