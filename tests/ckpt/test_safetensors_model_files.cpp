// A model's safetensors files as save_pretrained lays them out (one file, or shards and their
// index), and the rounding of fp32 weights to the bf16 and fp16 they are shared in.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "ckpt/safetensors_format.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace mgt;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::uint16_t narrowed(ckpt::SafetensorsDType dtype, float value) {
  const std::vector<std::byte> bytes = ckpt::float32_to_safetensors(dtype, std::span<const float>(&value, 1));
  std::uint16_t h;
  std::memcpy(&h, bytes.data(), 2);
  return h;
}

}  // namespace

TEST_CASE("fp32 rounds to bf16 and fp16 to nearest, ties to even, as torch does", "[ckpt][safetensors]") {
  using ckpt::SafetensorsDType;
  const float inf = std::numeric_limits<float>::infinity();
  // bf16: the upper half of the fp32, rounded.
  CHECK(narrowed(SafetensorsDType::kBF16, 1.0f) == 0x3f80);
  CHECK(narrowed(SafetensorsDType::kBF16, 0.1f) == 0x3dcd);                                  // 0x3dcccccd rounds up
  CHECK(narrowed(SafetensorsDType::kBF16, std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, to even
  CHECK(narrowed(SafetensorsDType::kBF16, std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, to even
  CHECK(narrowed(SafetensorsDType::kBF16, -inf) == 0xff80);
  CHECK((narrowed(SafetensorsDType::kBF16, std::numeric_limits<float>::quiet_NaN()) & 0x7fc0) == 0x7fc0);
  // fp16: normal, largest finite, overflow, subnormals and underflow.
  CHECK(narrowed(SafetensorsDType::kF16, 1.0f) == 0x3c00);
  CHECK(narrowed(SafetensorsDType::kF16, -2.0f) == 0xc000);
  CHECK(narrowed(SafetensorsDType::kF16, 0.1f) == 0x2e66);
  CHECK(narrowed(SafetensorsDType::kF16, 1.0f / 3.0f) == 0x3555);
  CHECK(narrowed(SafetensorsDType::kF16, 65504.0f) == 0x7bff);
  CHECK(narrowed(SafetensorsDType::kF16, 65519.0f) == 0x7bff);
  CHECK(narrowed(SafetensorsDType::kF16, 65520.0f) == 0x7c00);  // the tie rounds to even: infinity
  CHECK(narrowed(SafetensorsDType::kF16, 1e6f) == 0x7c00);
  CHECK(narrowed(SafetensorsDType::kF16, 2047.5f) == 0x6800);  // tie of 2047 and 2048: to even, into the exponent
  CHECK(narrowed(SafetensorsDType::kF16, 2046.5f) == 0x67fe);  // tie of 2046 and 2047: to even
  CHECK(narrowed(SafetensorsDType::kF16, std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(narrowed(SafetensorsDType::kF16, std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(narrowed(SafetensorsDType::kF16, std::ldexp(1.0f, -25)) == 0x0000);  // tie, to even
  CHECK(narrowed(SafetensorsDType::kF16, std::ldexp(3.0f, -26)) == 0x0001);
  CHECK(narrowed(SafetensorsDType::kF16, std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 units: tie, to even
  CHECK(narrowed(SafetensorsDType::kF16, std::ldexp(1023.75f, -24)) == 0x0400);  // rounds up into the normals
  CHECK(narrowed(SafetensorsDType::kF16, -0.0f) == 0x8000);
  CHECK(narrowed(SafetensorsDType::kF16, 1e-10f) == 0x0000);
  CHECK((narrowed(SafetensorsDType::kF16, std::numeric_limits<float>::quiet_NaN()) & 0x7e00) == 0x7e00);

  // Widening the narrowed values gives them back exactly.
  std::vector<float> values;
  for (int i = -200; i <= 200; ++i) values.push_back(std::ldexp(static_cast<float>(i) + 0.37f, i / 20));
  for (auto dtype : {SafetensorsDType::kBF16, SafetensorsDType::kF16}) {
    const std::vector<float> once = ckpt::safetensors_to_float32(dtype, ckpt::float32_to_safetensors(dtype, values));
    CHECK(ckpt::safetensors_to_float32(dtype, ckpt::float32_to_safetensors(dtype, once)) == once);
  }
  CHECK(ckpt::safetensors_to_float32(SafetensorsDType::kF32,
                                     ckpt::float32_to_safetensors(SafetensorsDType::kF32, values)) == values);
}

TEST_CASE("Safetensors model files: shards cut like huggingface_hub's and read back", "[ckpt][safetensors]") {
  CHECK(ckpt::parse_shard_size("5GB", "--max-shard-size") == 5'000'000'000ULL);
  CHECK(ckpt::parse_shard_size("2GiB", "--max-shard-size") == 2ULL << 30);
  CHECK(ckpt::parse_shard_size("100kb", "--max-shard-size") == 100'000ULL);
  CHECK(ckpt::parse_shard_size("1234", "--max-shard-size") == 1234ULL);
  CHECK_THROWS_WITH(ckpt::parse_shard_size("5 GB", "--max-shard-size"), Contains("--max-shard-size '5 GB'"));
  CHECK_THROWS_WITH(ckpt::parse_shard_size("0MB", "--max-shard-size"), Contains("larger than zero"));
  try {
    ckpt::parse_shard_size("1.5GB", "--max-shard-size");
    FAIL("1.5GB accepted");
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
  }

  const std::string dir = test::scratch_dir("safetensors_model_files");
  // 40, 40, 120 (alone: larger than the limit), 40, 40 bytes with a limit of 100.
  std::vector<std::vector<float>> values = {std::vector<float>(10, 1.0f), std::vector<float>(10, 2.0f),
                                            std::vector<float>(30, 3.0f), std::vector<float>(10, 4.0f),
                                            std::vector<float>(10, 5.0f)};
  std::vector<ckpt::SafetensorsTensor> tensors;
  const char* names[] = {"e", "d", "c", "b", "a"};
  for (std::size_t i = 0; i < values.size(); ++i)
    tensors.push_back(ckpt::SafetensorsTensor::float32(names[i], {static_cast<std::int64_t>(values[i].size())},
                                                       values[i]));
  const auto written = ckpt::write_safetensors_model_files(dir, tensors, 100, {{"format", "pt"}});
  // huggingface_hub's split: [c] alone is a shard at once, [e d] when b no longer fits, then [b a].
  CHECK(written == std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                            "model-00003-of-00003.safetensors", "model.safetensors.index.json"});
  CHECK(file_bytes(dir + "/model.safetensors.index.json") ==
        "{\n  \"metadata\": {\n    \"total_parameters\": 70,\n    \"total_size\": 280\n  },\n"
        "  \"weight_map\": {\n    \"a\": \"model-00003-of-00003.safetensors\",\n"
        "    \"b\": \"model-00003-of-00003.safetensors\",\n    \"c\": \"model-00001-of-00003.safetensors\",\n"
        "    \"d\": \"model-00002-of-00003.safetensors\",\n    \"e\": \"model-00002-of-00003.safetensors\"\n  }\n}\n");
  const ckpt::SafetensorsModelFiles files(dir);
  CHECK(files.tensor_names() == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(files.read_float32(*files.find("c")) == values[2]);
  CHECK(files.file_of(*files.find("a")) == dir + "/model-00003-of-00003.safetensors");
  CHECK(files.file_of(*files.find("c")) == dir + "/model-00001-of-00003.safetensors");
  CHECK(files.find("z") == nullptr);

  const std::string single = dir + "/single";
  fs::create_directories(single);
  CHECK(ckpt::write_safetensors_model_files(single, tensors, 1000, {}) ==
        std::vector<std::string>{"model.safetensors"});
  const ckpt::SafetensorsModelFiles one(single);
  CHECK(one.description() == single + "/model.safetensors");
  CHECK(one.read_float32(*one.find("a")) == values[4]);
}
