#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "data/indexed_dataset.hpp"
#include "test_paths.hpp"

using namespace mgt;

namespace {

// Three documents: two sequences, none (empty), one sequence.
void write_small(const std::string& prefix, DType dtype) {
  IndexedDatasetWriter w(prefix, dtype);
  std::vector<TokenId> a = {5, 6, 7, 8, 9};
  std::vector<std::int32_t> la = {2, 3};
  w.add_document(a, la);
  w.add_document({}, {});
  std::vector<TokenId> c = {50256, 1};
  std::vector<std::int32_t> lc = {2};
  w.add_document(c, lc);
  w.finalize();
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void overwrite(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const std::string& prefix) {
  try {
    IndexedDataset d(prefix);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("indexed dataset .idx layout is Megatron's, byte for byte", "[data][indexed]") {
  auto dir = test::scratch_dir("indexed_layout");
  auto prefix = dir + "/small";
  write_small(prefix, DType::UInt16);
  // Written by hand from spec/megatron.md §1: header, lengths, byte pointers, document indices.
  std::vector<unsigned char> expected = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  auto put = [&](std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) expected.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  put(1, 8);  // version
  put(8, 1);  // uint16
  put(3, 8);  // sequences
  put(4, 8);  // documents + 1
  for (auto len : {2, 3, 2}) put(len, 4);
  for (auto ptr : {0, 4, 10}) put(ptr, 8);
  for (auto doc : {0, 2, 2, 3}) put(doc, 8);
  CHECK(file_bytes(prefix + ".idx") == expected);
  std::vector<unsigned char> bin = {5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 0x50, 0xc4, 1, 0};
  CHECK(file_bytes(prefix + ".bin") == bin);
}

TEST_CASE("indexed dataset round trip through the reader", "[data][indexed]") {
  auto dir = test::scratch_dir("indexed_roundtrip");
  for (DType dtype : {DType::UInt16, DType::Int32, DType::Int64}) {
    auto prefix = dir + "/rt_" + dtype_name(dtype);
    write_small(prefix, dtype);
    IndexedDataset d(prefix);
    CHECK(d.dtype() == dtype);
    CHECK(d.sequence_count() == 3);
    CHECK(d.document_count() == 3);
    CHECK(d.token_count() == 7);
    CHECK(d.read(1) == std::vector<std::int64_t>{7, 8, 9});
    CHECK(d.read(2) == std::vector<std::int64_t>{50256, 1});
    std::int64_t two[2];
    d.read(1, 1, 2, two);
    CHECK(two[0] == 8);
    CHECK(two[1] == 9);
    CHECK_THROWS_AS(d.read(1, 2, 2, two), Error);
    CHECK_THROWS_AS(d.read(3, 0, 0, two), Error);
  }
}

TEST_CASE("add_index merges datasets as merge_datasets.py does", "[data][indexed]") {
  auto dir = test::scratch_dir("indexed_merge");
  write_small(dir + "/a", DType::UInt16);
  write_small(dir + "/b", DType::UInt16);
  {
    IndexedDatasetWriter w(dir + "/merged", DType::UInt16);
    w.add_index(IndexedDataset(dir + "/a"));
    w.add_index(IndexedDataset(dir + "/b"));
    w.finalize();
  }
  IndexedDataset m(dir + "/merged");
  CHECK(m.sequence_count() == 6);
  CHECK(m.document_count() == 6);
  std::vector<std::int64_t> docs;
  for (std::size_t i = 0; i <= m.document_count(); ++i) docs.push_back(m.document_index(i));
  CHECK(docs == std::vector<std::int64_t>{0, 2, 2, 3, 5, 5, 6});
  CHECK(m.read(5) == std::vector<std::int64_t>{50256, 1});
  CHECK(m.sequence_pointer(5) == 24);

  write_small(dir + "/wide", DType::Int32);
  IndexedDatasetWriter w(dir + "/bad", DType::UInt16);
  CHECK_THROWS_WITH(w.add_index(IndexedDataset(dir + "/wide")), Catch::Contains("dtype"));
}

TEST_CASE("uncommitted writers leave no files", "[data][indexed]") {
  auto dir = test::scratch_dir("indexed_abandon");
  {
    IndexedDatasetWriter w(dir + "/x", DType::UInt16);
    std::vector<TokenId> t = {1, 2};
    std::vector<std::int32_t> l = {2};
    w.add_document(t, l);
    w.finish();
  }
  CHECK(std::filesystem::is_empty(dir));
  IndexedDatasetWriter w(dir + "/y", DType::UInt16);
  std::vector<TokenId> big = {70000};
  std::vector<std::int32_t> l = {1};
  CHECK_THROWS_WITH(w.add_document(big, l), Catch::Contains("uint16"));
}

TEST_CASE("corrupt or truncated datasets give clear errors", "[data][indexed]") {
  auto dir = test::scratch_dir("indexed_corrupt");
  auto prefix = dir + "/c";
  write_small(prefix, DType::UInt16);
  auto idx = file_bytes(prefix + ".idx");
  auto bin = file_bytes(prefix + ".bin");

  CHECK_THAT(error_of(dir + "/missing"), Catch::Contains("missing.idx"));

  auto bad = idx;
  bad[0] = 'X';
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("bad magic"));

  bad = idx;
  bad[9] = 2;
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("version 2"));

  bad = idx;
  bad[17] = 42;
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("dtype code 42"));

  bad = idx;
  bad[17] = 7;
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("float32"));

  bad.assign(idx.begin(), idx.end() - 3);
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("does not match its header"));

  bad.assign(idx.begin(), idx.begin() + 20);
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("truncated index"));

  bad = idx;
  bad[18] = 0xff;  // absurd sequence count
  bad[25] = 0x7f;
  overwrite(prefix + ".idx", bad);
  CHECK_THAT(error_of(prefix), Catch::Contains("corrupt header"));

  overwrite(prefix + ".idx", idx);
  overwrite(prefix + ".bin", std::vector<unsigned char>(bin.begin(), bin.end() - 2));
  CHECK_THAT(error_of(prefix), Catch::Contains("truncated"));
  overwrite(prefix + ".bin", bin);
  CHECK(error_of(prefix).empty());
}
