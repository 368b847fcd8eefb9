// The safetensors reader and writer: round trips, every supported dtype, and each malformed
// header refused with a message naming the file and the tensor.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "ckpt/safetensors_reader.hpp"
#include "ckpt/safetensors_writer.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::ckpt;
using Catch::Matchers::Contains;

namespace {

// A file with an arbitrary header and data; `declared` overrides the length field.
std::string write_raw(const std::string& path, const std::string& header, std::size_t data_bytes,
                      std::optional<std::uint64_t> declared = std::nullopt) {
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = declared.value_or(header.size());
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out << header << std::string(data_bytes, '\0');
  return path;
}

std::string reject_message(const std::string& path) {
  try {
    SafetensorsReader reader(path);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("the file was accepted: " << path);
  return {};
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

}  // namespace

TEST_CASE("safetensors round trip keeps names, shapes, values and metadata", "[ckpt][safetensors]") {
  const std::string dir = test::scratch_dir("safetensors_round_trip");
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 1e-30f, std::numeric_limits<float>::max(), -0.0f};
  const std::vector<float> b = {42.0f};
  const std::vector<float> empty;
  const std::string path = dir + "/x.safetensors";
  write_safetensors(path,
                    {SafetensorsTensor::float32("zeta.weight", {2, 3}, a), SafetensorsTensor::float32("alpha", {}, b),
                     SafetensorsTensor::float32("mid.empty", {0, 4}, empty)},
                    {{"format", "pt"}});
  const SafetensorsReader reader(path);
  REQUIRE(reader.metadata().at("format") == "pt");
  REQUIRE(reader.tensors().size() == 3);
  // Name order, as Hugging Face writes one dtype.
  CHECK(reader.tensors()[0].name == "alpha");
  CHECK(reader.tensors()[1].name == "mid.empty");
  CHECK(reader.tensors()[2].name == "zeta.weight");
  const auto* z = reader.find("zeta.weight");
  REQUIRE(z != nullptr);
  CHECK(z->shape == std::vector<std::int64_t>{2, 3});
  const std::vector<float> back = reader.read_float32(*z);
  CHECK(std::memcmp(back.data(), a.data(), a.size() * sizeof(float)) == 0);
  CHECK(reader.read_float32(*reader.find("alpha")) == b);
  CHECK(reader.read_float32(*reader.find("mid.empty")).empty());
  CHECK(reader.find("missing") == nullptr);

  // The header is padded so that the data starts 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  CHECK(n % 8 == 0);
}

TEST_CASE("safetensors reader widens F64, F16 and BF16 to fp32", "[ckpt][safetensors]") {
  const std::string dir = test::scratch_dir("safetensors_dtypes");
  const std::vector<double> f64 = {1.5, -2.25, 0.1};
  // F16: 1.0, -2.0, 65504 (largest), 2^-24 (smallest subnormal), +inf, 0.
  const std::vector<std::uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x0000};
  // BF16: 1.0, -3.0, 1/3 truncated.
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc040, 0x3eaa};
  const std::vector<float> f32 = {7.0f};
  const std::string path = dir + "/mixed.safetensors";
  write_safetensors(path, {{"d", SafetensorsDType::kF64, {3}, bytes_of(f64)},
                           {"h", SafetensorsDType::kF16, {2, 3}, bytes_of(f16)},
                           {"b", SafetensorsDType::kBF16, {3}, bytes_of(bf16)},
                           {"f", SafetensorsDType::kF32, {1}, bytes_of(f32)}});
  const SafetensorsReader reader(path);
  CHECK(reader.read_float32(*reader.find("d")) == std::vector<float>{1.5f, -2.25f, 0.1f});
  const std::vector<float> h = reader.read_float32(*reader.find("h"));
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(std::isinf(h[4]));
  CHECK(h[5] == 0.0f);
  const std::vector<float> b = reader.read_float32(*reader.find("b"));
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -3.0f);
  CHECK(b[2] == Approx(1.0 / 3.0).epsilon(0.01));
  CHECK(reader.find("h")->dtype == SafetensorsDType::kF16);
  CHECK(reader.read_float32(*reader.find("f")) == f32);
}

TEST_CASE("safetensors reader refuses malformed files naming the file and tensor", "[ckpt][safetensors]") {
  const std::string dir = test::scratch_dir("safetensors_malformed");
  const std::string ok = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

  SECTION("shorter than the length field") {
    std::ofstream(dir + "/tiny") << "abc";
    CHECK_THAT(reject_message(dir + "/tiny"), Contains(dir + "/tiny") && Contains("too short"));
  }
  SECTION("header length beyond the end of the file (truncated)") {
    const std::string p = write_raw(dir + "/trunc", "{" + ok + "}", 8, 4096);
    CHECK_THAT(reject_message(p), Contains("header length 4096 is larger than the file") && Contains(p));
  }
  SECTION("header not starting with a brace") {
    CHECK_THAT(reject_message(write_raw(dir + "/nobrace", " {" + ok + "}", 8)), Contains("does not start with '{'"));
  }
  SECTION("invalid JSON") {
    CHECK_THAT(reject_message(write_raw(dir + "/badjson", "{\"a\": {\"dtype\": ", 8)), Contains("not valid JSON"));
  }
  SECTION("unknown dtype") {
    const std::string p = write_raw(dir + "/dtype", R"({"q":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8);
    CHECK_THAT(reject_message(p), Contains("tensor 'q'") && Contains("dtype 'Q4'"));
  }
  SECTION("shape and dtype disagree with the offsets") {
    const std::string p = write_raw(dir + "/size", R"({"s":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
    CHECK_THAT(reject_message(p), Contains("tensor 's'") && Contains("needs 12 bytes") && Contains("span 8"));
  }
  SECTION("offsets out of range") {
    const std::string p = write_raw(dir + "/range", R"({"r":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
    CHECK_THAT(reject_message(p), Contains("tensor 'r'") && Contains("out of range"));
  }
  SECTION("offsets ending before they begin") {
    const std::string p = write_raw(dir + "/reverse", R"({"r":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8);
    CHECK_THAT(reject_message(p), Contains("tensor 'r'") && Contains("end before they begin"));
  }
  SECTION("overlapping tensors") {
    const std::string p = write_raw(dir + "/overlap",
                                    R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    12);
    CHECK_THAT(reject_message(p), Contains("tensor 'y' overlaps tensor 'x'"));
  }
  SECTION("a gap between tensors") {
    const std::string p = write_raw(dir + "/gap",
                                    R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("y":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                    12);
    CHECK_THAT(reject_message(p), Contains("before tensor 'y' belong to no tensor"));
  }
  SECTION("bytes after the last tensor") {
    CHECK_THAT(reject_message(write_raw(dir + "/trailing", "{" + ok + "}", 12)),
               Contains("4 bytes after the last tensor"));
  }
  SECTION("duplicate tensor names") {
    const std::string p = write_raw(dir + "/dup", "{" + ok + "," + ok + "}", 8);
    CHECK_THAT(reject_message(p), Contains("tensor 'a' appears twice"));
  }
  SECTION("a tensor entry that is not an object") {
    CHECK_THAT(reject_message(write_raw(dir + "/notobj", R"({"a":[1,2]})", 0)), Contains("tensor 'a'"));
  }
  SECTION("metadata values that are not strings") {
    CHECK_THAT(reject_message(write_raw(dir + "/meta", R"({"__metadata__":{"k":1}})", 0)), Contains("__metadata__"));
  }
}

TEST_CASE("safetensors writer refuses duplicate names and data of the wrong size", "[ckpt][safetensors]") {
  const std::string dir = test::scratch_dir("safetensors_writer_errors");
  const std::vector<float> v = {1.0f, 2.0f};
  CHECK_THROWS_WITH(write_safetensors(dir + "/d", {SafetensorsTensor::float32("a", {2}, v),
                                                   SafetensorsTensor::float32("a", {2}, v)}),
                    Contains("tensor 'a' is given twice"));
  CHECK_THROWS_WITH(write_safetensors(dir + "/s", {SafetensorsTensor::float32("a", {3}, v)}),
                    Contains("tensor 'a' has 8 bytes of data, its shape needs 12"));
  CHECK_FALSE(std::filesystem::exists(dir + "/s"));
}
