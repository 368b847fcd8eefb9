#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/tfrecord.hpp"
#include "test_paths.hpp"
#include "train/tensorboard_writer.hpp"

using namespace mgt;

namespace {

// A protocol buffer message read back field by field: varints and fixed fields as their raw
// integers, length-delimited fields as bytes.
struct Field {
  int number = 0;
  int wire_type = 0;
  std::uint64_t integer = 0;
  std::string bytes;
};

std::uint64_t read_varint(const std::string& in, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(in.at(at++));
    v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return v;
  }
  FAIL("varint too long");
  return 0;
}

std::uint64_t read_fixed(const std::string& in, std::size_t& at, int size) {
  std::uint64_t v = 0;
  for (int i = 0; i < size; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in.at(at++))) << (8 * i);
  return v;
}

std::vector<Field> decode(const std::string& message) {
  std::vector<Field> fields;
  std::size_t at = 0;
  while (at < message.size()) {
    const std::uint64_t key = read_varint(message, at);
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    switch (f.wire_type) {
      case 0: f.integer = read_varint(message, at); break;
      case 1: f.integer = read_fixed(message, at, 8); break;
      case 5: f.integer = read_fixed(message, at, 4); break;
      case 2: {
        const std::uint64_t size = read_varint(message, at);
        f.bytes = message.substr(at, size);
        REQUIRE(f.bytes.size() == size);
        at += size;
        break;
      }
      default: FAIL("unexpected wire type " << f.wire_type);
    }
    fields.push_back(f);
  }
  return fields;
}

double as_double(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

float as_float(std::uint64_t bits) {
  const auto b = static_cast<std::uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

struct Scalar {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string tag;
  float value = 0;
  std::string file_version;
};

Scalar decode_event(const std::string& event) {
  Scalar s;
  for (const Field& f : decode(event)) {
    if (f.number == 1) { CHECK(f.wire_type == 1); s.wall_time = as_double(f.integer); }
    if (f.number == 2) { CHECK(f.wire_type == 0); s.step = static_cast<std::int64_t>(f.integer); }
    if (f.number == 3) { CHECK(f.wire_type == 2); s.file_version = f.bytes; }
    if (f.number == 5) {
      const std::vector<Field> summary = decode(f.bytes);
      REQUIRE(summary.size() == 1);
      CHECK(summary[0].number == 1);
      for (const Field& v : decode(summary[0].bytes)) {
        if (v.number == 1) s.tag = v.bytes;
        if (v.number == 2) { CHECK(v.wire_type == 5); s.value = as_float(v.integer); }
      }
    }
  }
  return s;
}

// The records of a TFRecord file, their CRCs checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < file.size()) {
    REQUIRE(file.size() - at >= 12);
    const std::string length_bytes = file.substr(at, 8);
    std::size_t p = at;
    const std::uint64_t length = read_fixed(file, p, 8);
    CHECK(read_fixed(file, p, 4) == masked_crc32c(length_bytes));
    REQUIRE(file.size() - p >= length + 4);
    records.push_back(file.substr(p, length));
    p += length;
    CHECK(read_fixed(file, p, 4) == masked_crc32c(records.back()));
    at = p;
  }
  return records;
}

}  // namespace

TEST_CASE("tensorboard: Event messages decode back", "[train][tensorboard]") {
  const Scalar version = decode_event(file_version_event(1700000000.25));
  CHECK(version.wall_time == 1700000000.25);
  CHECK(version.file_version == "brain.Event:2");

  const Scalar s = decode_event(scalar_event(1700000001.5, 42, "lm loss", 3.25f));
  CHECK(s.wall_time == 1700000001.5);
  CHECK(s.step == 42);
  CHECK(s.tag == "lm loss");
  CHECK(s.value == 3.25f);
  CHECK(s.file_version.empty());
  CHECK(decode_event(scalar_event(0, 1ll << 40, "x", 0)).step == (1ll << 40));

  CHECK(events_file_name(1700000000, "node7", 1234) == "events.out.tfevents.1700000000.node7.1234.0");
  CHECK(events_file_name(5, "h", 1) == "events.out.tfevents.0000000005.h.1.0");
}

TEST_CASE("tensorboard: the writer's file, queued and flushed", "[train][tensorboard]") {
  const std::string dir = test::scratch_dir("tensorboard_writer") + "/runs/new";  // parents made
  std::string path;
  {
    TensorBoardWriter writer(dir, 3);
    path = writer.path();
    CHECK(std::filesystem::path(path).parent_path() == std::filesystem::path(dir));
    CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
    // The file-version record is written at once.
    CHECK(read_records(path).size() == 1);
    writer.add_scalar("learning-rate", 1e-3, 1);
    writer.add_scalar("lm loss", 10.5, 1);
    CHECK(read_records(path).size() == 1);  // queued
    writer.add_scalar("grad-norm", 2.0, 1);  // the queue is full: written
    CHECK(read_records(path).size() == 4);
    writer.add_scalar("lm loss", 9.5, 2);
    writer.flush();
    CHECK(read_records(path).size() == 5);
    writer.add_scalar("lm loss validation", 9.0, 2);
  }  // the destructor writes the rest
  const std::vector<std::string> records = read_records(path);
  REQUIRE(records.size() == 6);
  CHECK(decode_event(records[0]).file_version == "brain.Event:2");
  const Scalar first = decode_event(records[1]);
  CHECK(first.tag == "learning-rate");
  CHECK(first.value == 1e-3f);
  CHECK(first.step == 1);
  CHECK(std::abs(first.wall_time - decode_event(records[0]).wall_time) < 60);
  CHECK(decode_event(records[4]).tag == "lm loss");
  CHECK(decode_event(records[4]).step == 2);
  CHECK(decode_event(records[5]).tag == "lm loss validation");
  CHECK(decode_event(records[5]).value == 9.0f);
}

TEST_CASE("tensorboard: a directory that cannot be made is an error naming the flag", "[train][tensorboard]") {
  const std::string dir = test::scratch_dir("tensorboard_writer_error");
  std::ofstream(dir + "/file") << "x";
  try {
    TensorBoardWriter writer(dir + "/file/sub", 10);
    FAIL("no error");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).rfind("--tensorboard-dir: cannot create '" + dir + "/file/sub'", 0) == 0);
  }
}
