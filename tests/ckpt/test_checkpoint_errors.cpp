#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt_testing.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

// HDF5's own shutdown (what its exit handler runs); declared here because the tests do not see
// HDF5's headers.
extern "C" int H5close(void);

using namespace mgt;
using namespace mgt::ckpt;
using Catch::Matchers::Contains;

namespace {

// A shard with two fp32 tensors of 4 chunks each.
std::string write_small_shard(const std::string& dir) {
  const auto path = dir + "/mp_rank_00.h5";
  auto state = ckpt_test::make_fake_state(7, 1, 256);
  ShardWriter writer(path, state.metadata, ShardWriterOptions{.max_chunk_bytes = 64 * 64 * 4});
  ckpt_test::write_fake_state(writer, state);
  writer.close();
  return path;
}

const std::string kWeight = model_tensor_path("decoder.layers.0.mlp.linear_fc1.weight");
const std::string kExpAvg = optimizer_tensor_path(OptimizerState::ExpAvg, "decoder.layers.0.mlp.linear_fc1.weight");

void overwrite(const std::string& path, std::uint64_t offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("reading with the wrong shape names tensor, shapes and file", "[ckpt]") {
  auto path = write_small_shard(test::scratch_dir("ckpt_wrong_shape"));
  ShardReader reader(path);
  std::vector<float> out(128 * 64);
  const std::vector<std::int64_t> expected{128, 64};
  CHECK_THROWS_WITH(reader.read(kWeight, TensorDType::Float32, expected, std::as_writable_bytes(std::span(out))),
                    "checkpoint tensor '" + kWeight + "' has shape [256, 64] but the model expects [128, 64]" +
                        " (file '" + path + "')");
  CHECK_THROWS_WITH(reader.read(kWeight, TensorDType::BFloat16, std::vector<std::int64_t>{256, 64},
                                std::as_writable_bytes(std::span(out))),
                    Contains("has dtype float32 but the model expects bfloat16") && Contains(path));
  CHECK_THROWS_WITH(reader.read(kWeight, TensorDType::Float32, std::vector<std::int64_t>{256, 64},
                                std::as_writable_bytes(std::span(out))),
                    Contains("holds 32768 bytes, the tensor needs 65536"));
}

TEST_CASE("reading a missing tensor names tensor and file", "[ckpt]") {
  auto path = write_small_shard(test::scratch_dir("ckpt_missing_tensor"));
  ShardReader reader(path);
  const std::string name = model_tensor_path("decoder.layers.1.mlp.linear_fc1.weight");
  std::vector<float> out(256 * 64);
  CHECK_THROWS_WITH(reader.read(name, TensorDType::Float32, std::vector<std::int64_t>{256, 64},
                                std::as_writable_bytes(std::span(out))),
                    "checkpoint file '" + path + "' has no tensor '" + name + "'");
  CHECK_THROWS_WITH(reader.tensor(name), Contains("has no tensor"));
  CHECK_THROWS_WITH(reader.read_bytes(name), Contains("has no tensor"));
}

TEST_CASE("a missing, truncated or foreign file is refused with its name", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_bad_files");
  CHECK_THROWS_WITH(ShardReader(dir + "/absent.h5"), Contains(dir + "/absent.h5") && Contains("No such file"));
  CHECK_THROWS_WITH(ShardReader(dir), Contains("not a regular file"));

  {
    std::ofstream text(dir + "/notes.h5");
    text << "{\"this\": \"is JSON, not HDF5\"}\n";
  }
  CHECK_THROWS_WITH(ShardReader(dir + "/notes.h5"), Contains(dir + "/notes.h5") && Contains("not an HDF5 file"));
  std::ofstream(dir + "/empty.h5").close();
  CHECK_THROWS_WITH(ShardReader(dir + "/empty.h5"), Contains(dir + "/empty.h5") && Contains("not an HDF5 file"));

  auto path = write_small_shard(dir);
  const auto size = std::filesystem::file_size(path);
  for (std::uintmax_t keep : {size - 1, size / 2, std::uintmax_t{4096}, std::uintmax_t{100}, std::uintmax_t{7}}) {
    INFO("truncated to " << keep << " of " << size << " bytes");
    const auto cut = dir + "/cut.h5";
    std::filesystem::copy_file(path, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(cut, keep);
    try {
      ShardReader reader(cut);
      reader.verify();
      FAIL("a truncated checkpoint file was accepted");
    } catch (const Error& e) {
      std::string message = e.what();
      CHECK_THAT(message, Contains(cut));
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("a corrupted chunk fails its checksum, naming file and tensor", "[ckpt]") {
  auto dir = test::scratch_dir("ckpt_checksum");
  auto path = write_small_shard(dir);
  std::vector<StoredChunk> chunks;
  {
    ShardReader reader(path);
    chunks = reader.stored_chunks(kExpAvg);
  }
  REQUIRE(chunks.size() == 4);
  for (const auto& chunk : chunks) CHECK(chunk.size == 64 * 64 * 4 + 4);  // data + Fletcher32 sum

  // The stored chunk is the tensor's bytes verbatim: the checksum filter does not transform data.
  auto state = ckpt_test::make_fake_state(7, 1, 256);
  std::ifstream in(path, std::ios::binary);
  std::string third(64 * 64 * 4, '\0');
  in.seekg(static_cast<std::streamoff>(chunks[2].file_offset));
  in.read(third.data(), static_cast<std::streamsize>(third.size()));
  CHECK(std::memcmp(third.data(), state.contents[1].data() + 2 * third.size(), third.size()) == 0);

  overwrite(path, chunks[2].file_offset + 1000, "\x5a\xa5");
  ShardReader reader(path);  // metadata is intact: opening works
  std::vector<float> out(256 * 64);
  CHECK_THROWS_WITH(reader.read(kExpAvg, TensorDType::Float32, std::vector<std::int64_t>{256, 64},
                                std::as_writable_bytes(std::span(out))),
                    Contains("checkpoint tensor '" + kExpAvg + "' in '" + path + "'") && Contains("H5Dread failed") &&
                        Contains("Fletcher32"));
  // The other tensor is untouched and still loads.
  CHECK_NOTHROW(reader.read(kWeight, TensorDType::Float32, std::vector<std::int64_t>{256, 64},
                            std::as_writable_bytes(std::span(out))));
  CHECK_THROWS_WITH(reader.verify(), Contains(kExpAvg));
}

TEST_CASE("damaged metadata fails its CRC-32C, naming the file", "[ckpt]") {
  // Arguments as long as a real run's lie where HDF5 keeps no checksum of its own (a heap's
  // "huge" objects); short attributes sit in the checksummed object header.
  auto dir = test::scratch_dir("ckpt_metadata_checksum");
  const auto path = dir + "/mp_rank_00.h5";
  {
    auto state = ckpt_test::make_fake_state(7, 1, 256);
    state.metadata.args_json = "{\"seed\": 7, \"note\": \"" + std::string(20000, 'x') + "\"}";
    ShardWriter writer(path, state.metadata);
    ckpt_test::write_fake_state(writer, state);
    writer.close();
  }
  CHECK_NOTHROW(ShardReader(path));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = bytes.find("{\"seed\": 7,");
  REQUIRE(at != std::string::npos);
  overwrite(path, at + 9, "8");  // {"seed": 8}: still valid JSON, another run's arguments
  CHECK_THROWS_WITH(ShardReader(path), Contains("'" + path + "' is damaged: the attributes of its 'meta' group") &&
                                           Contains("fail their CRC-32C"));
}

namespace {

// Flips bytes inside every copy of `name` in the file; returns how many copies there were.
int damage_name(const std::string& path, const std::string& name) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  int copies = 0;
  for (auto at = bytes.find(name); at != std::string::npos; at = bytes.find(name, at + 1)) {
    bytes[at + 3] = static_cast<char>(bytes[at + 3] ^ 0x55);
    bytes[at + 10] = static_cast<char>(bytes[at + 10] ^ 0x55);
    ++copies;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return copies;
}

// Fills the allocator's free blocks with non-zero bytes, so that a library that frees memory it
// never initialised does so visibly (a fresh process's memory is zero, and free(nullptr) is fine).
// Every small size class, since the allocator serves a request from freed blocks of its own class.
void dirty_free_memory() {
  for (std::size_t size = 16; size <= 8192; size += 16) {
    void* blocks[4];
    for (void*& block : blocks) {
      block = std::malloc(size);
      std::memset(block, 0xA5, size);
    }
    for (void* block : blocks) std::free(block);
  }
}

}  // namespace

TEST_CASE("a damaged link name fails its checksum, every time, without corrupting the process", "[ckpt]") {
  // A model-like shard: more than eight tensors in a group, so HDF5 keeps their names in a
  // checksummed heap block (dense link storage) rather than in the group's header.
  const auto dir = test::scratch_dir("ckpt_damaged_link_name");
  const std::string path = dir + "/mp_rank_00.h5";
  const std::vector<std::string> params = {
      "decoder.layers.0.input_layernorm.bias", "decoder.layers.0.input_layernorm.weight",
      "decoder.layers.0.mlp.linear_fc1.bias", "decoder.layers.0.mlp.linear_fc1.weight",
      "decoder.layers.0.mlp.linear_fc2.bias", "decoder.layers.0.mlp.linear_fc2.weight",
      "decoder.layers.0.self_attention.linear_proj.bias", "decoder.layers.0.self_attention.linear_proj.weight",
      "decoder.layers.0.self_attention.linear_qkv.bias", "decoder.layers.0.self_attention.linear_qkv.weight",
      "decoder.final_layernorm.bias", "decoder.final_layernorm.weight", "embedding.word_embeddings.weight"};
  {
    ShardWriter writer(path, CheckpointMetadata{});
    for (const std::string& p : params) {
      const auto record = TensorRecord::whole(model_tensor_path(p), TensorDType::Float32, {16});
      writer.write(record, ckpt_test::pseudo_random_bytes(record.byte_size(), 1));
    }
    writer.close();
  }
  REQUIRE(damage_name(path, "decoder.layers.0.input_layernorm.bias") == 1);
  // In a child: a crash must not take the test runner with it. The reader is opened twice, as
  // mgt-train opens the checkpoint it resumes (its padded vocabulary first, then the weights).
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      dirty_free_memory();
      try {
        ShardReader reader(path);
        code = 10;
      } catch (const Error& e) {
        const std::string message = e.what();
        if (message.find("checkpoint file '" + path + "'") == std::string::npos ||
            message.find("checksum") == std::string::npos) {
          std::fprintf(stderr, "unexpected message: %s\n", message.c_str());
          code = 11;
        }
      }
    }
    if (H5close() < 0) code = 12;  // what the programs' exit runs
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child status " << status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
