#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/npy.hpp"
#include "test_paths.hpp"

using namespace mgt;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void put_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// What numpy.save writes before the data: magic, version 1.0, little-endian header length, the
// dict, 21 - len(str(shape[0])) growth spaces, then spaces and '\n' up to a multiple of 64.
std::string numpy_header(const std::string& dict, std::size_t total) {
  std::string h("\x93NUMPY\x01\x00", 8);
  std::size_t len = total - 10;
  h += static_cast<char>(len & 0xff);
  h += static_cast<char>(len >> 8);
  h += dict;
  h.append(total - 1 - h.size(), ' ');
  h += '\n';
  return h;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("npy headers are numpy.save's, byte for byte", "[index]") {
  // python3 -c "import numpy as np, io; b=io.BytesIO(); np.save(b, np.arange(10, dtype=np.int32));
  //             print(b.getvalue()[:128])"   (total file sizes: 168, 168, 128, 134, 128)
  CHECK(npy_header(NpyDType::Int32, {10}) ==
        numpy_header("{'descr': '<i4', 'fortran_order': False, 'shape': (10,), }", 128));
  CHECK(npy_header(NpyDType::Int32, {5, 2}) ==
        numpy_header("{'descr': '<i4', 'fortran_order': False, 'shape': (5, 2), }", 128));
  CHECK(npy_header(NpyDType::UInt32, {0}) ==
        numpy_header("{'descr': '<u4', 'fortran_order': False, 'shape': (0,), }", 128));
  CHECK(npy_header(NpyDType::Int16, {3}) ==
        numpy_header("{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", 128));
  CHECK(npy_header(NpyDType::Int64, {0, 2}) ==
        numpy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 2), }", 128));
  // The growth padding shrinks as the first axis gets longer; the header stays 64-aligned.
  for (std::size_t n : {1ULL, 12345678901234567ULL, 123456789012345678ULL}) {
    auto h = npy_header(NpyDType::Int64, {n, 2});
    CHECK(h.size() % 64 == 0);
    CHECK(h.back() == '\n');
  }
}

TEST_CASE("npy files round-trip every index dtype", "[index]") {
  auto dir = test::scratch_dir("npy_roundtrip");
  write_npy(dir + "/a.npy", NpyArray::from_vector(std::vector<std::int32_t>{0, -1, 7}, {3}));
  write_npy(dir + "/b.npy", NpyArray::from_vector(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, {3, 2}));
  write_npy(dir + "/c.npy", NpyArray::from_vector(std::vector<std::uint32_t>{4000000000U}, {1}));
  write_npy(dir + "/d.npy", NpyArray::from_vector(std::vector<std::int16_t>{}, {0}));

  auto a = load_npy(dir + "/a.npy", {NpyDType::Int32}, 1);
  CHECK(std::vector<std::int32_t>(a.values<std::int32_t>().begin(), a.values<std::int32_t>().end()) ==
        std::vector<std::int32_t>{0, -1, 7});
  auto b = load_npy(dir + "/b.npy", {NpyDType::Int32, NpyDType::Int64}, 2, 2);
  CHECK(b.shape() == std::vector<std::size_t>{3, 2});
  CHECK(b.get(5) == 6);
  auto c = load_npy(dir + "/c.npy");
  CHECK(c.dtype() == NpyDType::UInt32);
  CHECK(c.get(0) == 4000000000LL);
  auto d = load_npy(dir + "/d.npy");
  CHECK(d.size() == 0);
  CHECK(file_bytes(dir + "/b.npy").size() == 128 + 48);
  CHECK_THROWS_AS(a.values<std::int64_t>(), Error);
}

TEST_CASE("npy reading rejects damaged or unexpected files, naming them", "[index]") {
  auto dir = test::scratch_dir("npy_errors");
  std::string good = dir + "/good.npy";
  write_npy(good, NpyArray::from_vector(std::vector<std::int32_t>{1, 2, 3, 4}, {4}));
  std::string bytes = file_bytes(good);

  std::string truncated = dir + "/truncated.npy";
  put_bytes(truncated, bytes.substr(0, bytes.size() - 3));
  auto msg = error_of([&] { load_npy(truncated); });
  CHECK(msg.find(truncated) != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);

  std::string longer = dir + "/longer.npy";
  put_bytes(longer, bytes + "xxxx");
  CHECK(error_of([&] { load_npy(longer); }).find(longer) != std::string::npos);

  std::string magic = dir + "/magic.npy";
  put_bytes(magic, "PK" + bytes.substr(2));
  CHECK(error_of([&] { load_npy(magic); }).find("bad magic") != std::string::npos);

  std::string header = dir + "/header.npy";
  std::string h = bytes;
  h.replace(h.find("False"), 5, "Flase");
  put_bytes(header, h);
  CHECK(error_of([&] { load_npy(header); }).find("malformed") != std::string::npos);

  std::string f4 = dir + "/f4.npy";
  std::string g = bytes;
  g.replace(g.find("<i4"), 3, "<f4");
  put_bytes(f4, g);
  CHECK(error_of([&] { load_npy(f4); }).find("unsupported .npy dtype '<f4'") != std::string::npos);

  CHECK(error_of([&] { load_npy(good, {NpyDType::Int64}, 1); }).find("expected int64") != std::string::npos);
  CHECK(error_of([&] { load_npy(good, {NpyDType::Int32}, 2, 2); }).find("2-D") != std::string::npos);
  CHECK(error_of([&] { load_npy(dir + "/missing.npy"); }).find("missing.npy") != std::string::npos);

  std::string empty = dir + "/empty.npy";
  put_bytes(empty, "");
  CHECK(error_of([&] { load_npy(empty); }).find(empty) != std::string::npos);
}
