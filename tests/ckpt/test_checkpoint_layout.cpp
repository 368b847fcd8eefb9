#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt/tensor_record.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::ckpt;
using Catch::Matchers::Contains;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace

TEST_CASE("checkpoint directory and shard names follow Megatron", "[ckpt]") {
  CHECK(iteration_directory_name(100) == "iter_0000100");
  CHECK(iteration_directory_name(0) == "iter_0000000");
  CHECK(iteration_directory_name(12345678) == "iter_12345678");
  CHECK(iteration_directory("/ckpt", 7) == "/ckpt/iter_0000007");
  CHECK(iteration_directory("/ckpt/", 7) == "/ckpt/iter_0000007");
  CHECK(tracker_file_path("run") == "run/latest_checkpointed_iteration.txt");
  CHECK_THROWS_AS(iteration_directory_name(-1), Error);

  WorldLayout world;
  CHECK(shard_file_name(ShardId::model_shard(world)) == "mp_rank_00.h5");
  world.tensor_model_parallel_size = 4;
  world.tensor_model_parallel_rank = 3;
  CHECK(shard_file_name(ShardId::model_shard(world)) == "mp_rank_03.h5");
  world.pipeline_model_parallel_size = 2;
  world.pipeline_model_parallel_rank = 1;
  CHECK(shard_file_name(ShardId::model_shard(world)) == "mp_rank_03_001.h5");
  world.data_parallel_size = 8;
  world.data_parallel_rank = 5;
  CHECK(shard_file_name(ShardId::data_parallel_shard(world)) == "mp_rank_03_001_dp_005.h5");
  world.pipeline_model_parallel_size = 1;
  world.pipeline_model_parallel_rank = 0;
  CHECK(shard_file_name(ShardId::data_parallel_shard(world)) == "mp_rank_03_dp_005.h5");
}

TEST_CASE("shard file names parse back", "[ckpt]") {
  for (const ShardId& id : {ShardId{0, {}, {}}, ShardId{3, 1, {}}, ShardId{12, {}, 7}, ShardId{1, 2, 3}})
    CHECK(parse_shard_file_name(shard_file_name(id)) == id);
  CHECK_FALSE(parse_shard_file_name("mp_rank_00.pt"));
  CHECK_FALSE(parse_shard_file_name("mp_rank_.h5"));
  CHECK_FALSE(parse_shard_file_name("mp_rank_00_x.h5"));
  CHECK_FALSE(parse_shard_file_name("mp_rank_00.h5.tmp"));
  CHECK_FALSE(parse_shard_file_name("model_optim_rng.h5"));

  auto dir = test::scratch_dir("ckpt_list_shards");
  for (const char* name : {"mp_rank_01.h5", "mp_rank_00.h5", "notes.txt", "mp_rank_00_dp_000.h5"})
    write_text(dir + "/" + name, "x");
  auto files = list_shard_files(dir);
  REQUIRE(files.size() == 3);
  CHECK(std::filesystem::path(files[0]).filename() == "mp_rank_00.h5");
  CHECK(std::filesystem::path(files[1]).filename() == "mp_rank_00_dp_000.h5");
  CHECK(std::filesystem::path(files[2]).filename() == "mp_rank_01.h5");
}

TEST_CASE("tracker file holds an iteration or release", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_tracker");
  CHECK_FALSE(read_tracker_file(dir));
  CHECK_FALSE(latest_iteration(dir));

  write_tracker_file(dir, 1500);
  std::ifstream in(tracker_file_path(dir));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "1500");
  CHECK(latest_iteration(dir) == 1500);

  write_text(tracker_file_path(dir), " 42\n");
  CHECK(read_tracker_file(dir) == LatestCheckpoint{42, false});
  write_text(tracker_file_path(dir), "release\n");
  CHECK(read_tracker_file(dir) == LatestCheckpoint{0, true});
  CHECK(latest_iteration(dir) == 0);
}

TEST_CASE("tracker file garbage is refused with the file named", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_tracker_garbage");
  const std::vector<std::string> garbages{"", "\n", "abc", "-3", "12abc", "1.5", "99999999999999999999999",
                                          std::string("\x00\x01\x02", 3), std::string(10000, '7') + "x"};
  for (const auto& garbage : garbages) {
    INFO("tracker text: " << garbage.substr(0, 30));
    write_text(tracker_file_path(dir), garbage);
    CHECK_THROWS_WITH(read_tracker_file(dir), Contains(tracker_file_path(dir)) &&
                                                  Contains("expected an iteration number or 'release'"));
  }
  // Shown as written: a newline as \n, a long text cut with its length.
  write_text(tracker_file_path(dir), "12abc\n");
  CHECK_THROWS_WITH(read_tracker_file(dir), Contains("holds '12abc\\n'"));
  write_text(tracker_file_path(dir), std::string(10000, '7') + "x");
  CHECK_THROWS_WITH(read_tracker_file(dir), Contains("7'... (") && Contains(" bytes), expected"));
}

TEST_CASE("checkpoint directory lookup reports a missing iteration", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_find_dir");
  CHECK_FALSE(find_latest_checkpoint_directory(dir));
  write_tracker_file(dir, 5);
  CHECK_THROWS_WITH(find_latest_checkpoint_directory(dir), Contains("iter_0000005") && Contains("does not exist"));
  std::filesystem::create_directory(dir + "/iter_0000005");
  CHECK(find_latest_checkpoint_directory(dir) == dir + "/iter_0000005");
  write_text(tracker_file_path(dir), "release");
  CHECK_THROWS_WITH(find_latest_checkpoint_directory(dir), Contains("release"));
  std::filesystem::create_directory(dir + "/release");
  CHECK(find_latest_checkpoint_directory(dir) == dir + "/release");
}

TEST_CASE("tensor paths and records are validated", "[ckpt]") {
  CHECK(model_tensor_path("decoder.final_layernorm.weight") == "model/decoder.final_layernorm.weight");
  CHECK(optimizer_tensor_path(OptimizerState::ExpAvgSq, "embedding.word_embeddings.weight") ==
        "optimizer/exp_avg_sq/embedding.word_embeddings.weight");
  CHECK(optimizer_tensor_path(OptimizerState::MasterParam, "w") == "optimizer/fp32_master_params/w");
  CHECK(rng_state_path("cuda_rng_state") == "rng/cuda_rng_state");
  for (const char* bad : {"", "/model/w", "model//w", "model/", "model/./w", "../w", "meta", "meta/x"})
    CHECK_THROWS_AS(validate_tensor_path(bad), Error);
  CHECK_NOTHROW(validate_tensor_path("model/decoder.layers.0.self_attention.linear_qkv.weight"));

  auto tp = TensorRecord::partitioned("model/w", TensorDType::BFloat16, {8, 16}, 0, 1, 4);
  CHECK(tp.global_shape == std::vector<std::int64_t>{32, 16});
  CHECK_NOTHROW(validate_tensor_record(tp));
  CHECK(tp.byte_size() == 8 * 16 * 2);

  auto bad_rank = tp;
  bad_rank.partition.rank = 4;
  CHECK_THROWS_WITH(validate_tensor_record(bad_rank), Contains("partition rank 4 of 4"));
  auto bad_shape = tp;
  bad_shape.global_shape = {32, 17};
  CHECK_THROWS_WITH(validate_tensor_record(bad_shape), Contains("cannot be a piece"));
  auto unpartitioned = TensorRecord::whole("model/w", TensorDType::Float32, {3});
  unpartitioned.global_shape = {4};
  CHECK_THROWS_WITH(validate_tensor_record(unpartitioned), Contains("not partitioned"));
  CHECK_THROWS_WITH(validate_tensor_record(TensorRecord::whole("model/s", TensorDType::Float32, {})),
                    Contains("at least one dimension"));

  auto flat = TensorRecord::flat_slice("optimizer/exp_avg/w", TensorDType::Float32, {4, 8}, 10, 20);
  CHECK(flat.shape == std::vector<std::int64_t>{20});
  CHECK_NOTHROW(validate_tensor_record(flat));
  auto overflow = TensorRecord::flat_slice("optimizer/exp_avg/w", TensorDType::Float32, {4, 8}, 20, 20);
  CHECK_THROWS_WITH(validate_tensor_record(overflow), Contains("outside the 32 elements"));

  CHECK(dtype_from_name("bfloat16") == TensorDType::BFloat16);
  CHECK_FALSE(dtype_from_name("complex64"));
  CHECK(dtype_name(TensorDType::Int64) == "int64");
}

TEST_CASE("chunk shapes keep whole rows within the byte budget", "[ckpt]") {
  using V = std::vector<std::int64_t>;
  CHECK(chunk_shape_for(V{1000, 64}, 4, 8 << 20) == V{1000, 64});          // fits whole
  // Rows of 1536 bytes: at most 5461 per chunk, so 10 chunks, each of 5031 rows (not 9 full
  // chunks and a tenth holding 1155 rows, stored as if it held 5461).
  CHECK(chunk_shape_for(V{50304, 768}, 2, 8 << 20) == V{5031, 768});
  CHECK(chunk_shape_for(V{50304, 128}, 4, 8 << 20) == V{12576, 128});     // 4 chunks exactly
  CHECK(chunk_shape_for(V{4, 1 << 22}, 4, 8 << 20) == V{1, 1 << 21});      // a row larger than a chunk
  CHECK(chunk_shape_for(V{10}, 8, 1) == V{1});                             // budget below one element
  CHECK(chunk_shape_for(V{2, 3, 4}, 1, 12) == V{1, 3, 4});
}
