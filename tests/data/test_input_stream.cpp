#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "data/input_stream.hpp"
#include "test_paths.hpp"
#include "tokenize_testing.hpp"

using namespace mgt;
using test::gzip_bytes;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}


std::string zstd_bytes(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  std::size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string read_all(const std::string& path) {
  InputStream in(path);
  std::string out;
  char buf[1000];  // small reads exercise the decoders' resumption
  for (std::size_t n; (n = in.read(buf, sizeof buf)) > 0;) out.append(buf, n);
  return out;
}

struct Collected {
  std::vector<std::string> texts;
  std::vector<std::uint64_t> numbers;
  std::vector<std::uint32_t> files;
  std::uint64_t bytes = 0;
};

Collected collect(const std::vector<std::string>& paths, std::size_t buffer = 4 << 20) {
  InputLines lines(paths, buffer);
  Collected c;
  InputLine line;
  while (lines.next(line)) {
    c.texts.emplace_back(line.text);
    c.numbers.push_back(line.number);
    c.files.push_back(line.file_index);
    c.bytes += line.stream_bytes;
  }
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string big_text() {
  std::string s;
  for (int i = 0; i < 20000; ++i) s += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  return s;
}

}  // namespace

TEST_CASE("input stream reads plain, gzip and zstd files by their content", "[tokenize]") {
  auto dir = test::scratch_dir("input_stream_formats");
  const std::string text = big_text();
  write_bytes(dir + "/plain.txt", text);
  write_bytes(dir + "/data.bin", gzip_bytes(text));  // the name says nothing about the format
  write_bytes(dir + "/other.gz", zstd_bytes(text));  // nor here
  CHECK(read_all(dir + "/plain.txt") == text);
  CHECK(read_all(dir + "/data.bin") == text);
  CHECK(read_all(dir + "/other.gz") == text);
  CHECK(InputStream(dir + "/data.bin").compression() == Compression::Gzip);
  CHECK(InputStream(dir + "/other.gz").compression() == Compression::Zstd);
  CHECK(InputStream(dir + "/plain.txt").compression() == Compression::None);
}

TEST_CASE("concatenated gzip members and zstd frames are one stream", "[tokenize]") {
  auto dir = test::scratch_dir("input_stream_concat");
  write_bytes(dir + "/a.gz", gzip_bytes("one\ntwo\n") + gzip_bytes("three\n") + std::string(8, '\0'));
  write_bytes(dir + "/a.zst", zstd_bytes("one\ntwo\n") + zstd_bytes("three\n"));
  CHECK(read_all(dir + "/a.gz") == "one\ntwo\nthree\n");
  CHECK(read_all(dir + "/a.zst") == "one\ntwo\nthree\n");
}

TEST_CASE("truncated or corrupt compressed input is an error naming the file", "[tokenize]") {
  auto dir = test::scratch_dir("input_stream_corrupt");
  std::string gz = gzip_bytes(big_text());
  write_bytes(dir + "/cut.gz", gz.substr(0, gz.size() / 2));
  std::string zs = zstd_bytes(big_text());
  write_bytes(dir + "/cut.zst", zs.substr(0, zs.size() / 2));
  std::string bad = gz;
  for (std::size_t i = 20; i < 200; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5A);
  write_bytes(dir + "/bad.gz", bad);
  write_bytes(dir + "/junk.gz", gzip_bytes("ok\n") + "not gzip");

  auto cut_gz = error_of([&] { read_all(dir + "/cut.gz"); });
  CHECK_THAT(cut_gz, Catch::Contains(dir + "/cut.gz") && Catch::Contains("truncated gzip"));
  auto cut_zst = error_of([&] { read_all(dir + "/cut.zst"); });
  CHECK_THAT(cut_zst, Catch::Contains(dir + "/cut.zst") && Catch::Contains("truncated zstd"));
  CHECK_THAT(error_of([&] { read_all(dir + "/bad.gz"); }), Catch::Contains("corrupt gzip"));
  CHECK_THAT(error_of([&] { read_all(dir + "/junk.gz"); }), Catch::Contains("corrupt gzip"));
  CHECK_THAT(error_of([&] { InputStream s(dir + "/missing.jsonl"); }),
             Catch::Contains("cannot open input") && Catch::Contains("missing.jsonl"));
}

TEST_CASE("lines end like Python's universal newlines and are numbered per file", "[tokenize]") {
  auto dir = test::scratch_dir("input_lines_terminators");
  write_bytes(dir + "/a.txt", "\xEF\xBB\xBF" "first\nsecond\r\nthird\rfourth\n\nlast");
  write_bytes(dir + "/b.txt", "b1\r");
  write_bytes(dir + "/empty.txt", "");
  write_bytes(dir + "/c.txt", "c1\n");
  auto c = collect({dir + "/a.txt", dir + "/b.txt", dir + "/empty.txt", dir + "/c.txt"});
  REQUIRE(c.texts == std::vector<std::string>{"first", "second", "third", "fourth", "", "last", "b1", "c1"});
  CHECK(c.numbers == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 1, 1});
  CHECK(c.files == std::vector<std::uint32_t>{0, 0, 0, 0, 0, 0, 1, 3});
  CHECK(c.bytes == 32 + 3 + 3);  // every byte but the byte order mark
}

TEST_CASE("a carriage return split across reads still pairs with its newline", "[tokenize]") {
  auto dir = test::scratch_dir("input_lines_cr_boundary");
  // With a 4096-byte buffer the "\r" of line 1 lands on the buffer's last byte.
  std::string first(4095, 'x');
  write_bytes(dir + "/a.txt", first + "\r\nsecond\n");
  auto c = collect({dir + "/a.txt"}, 4096);
  REQUIRE(c.texts.size() == 2);
  CHECK(c.texts[0] == first);
  CHECK(c.texts[1] == "second");
}

TEST_CASE("lines much longer than the buffer are read whole", "[tokenize]") {
  auto dir = test::scratch_dir("input_lines_long");
  std::string long_line(3'000'000, 'a');
  long_line[1'234'567] = 'b';
  write_bytes(dir + "/a.txt", "short\n" + long_line + "\nafter");
  write_bytes(dir + "/a.gz", gzip_bytes("short\n" + long_line + "\nafter"));
  for (const char* name : {"/a.txt", "/a.gz"}) {
    auto c = collect({dir + name}, 4096);
    REQUIRE(c.texts.size() == 3);
    CHECK(c.texts[1] == long_line);
    CHECK(c.texts[2] == "after");
  }
}

TEST_CASE("a line past the longest allowed is an error naming its file and line", "[tokenize]") {
  // The limit (1 GiB by default) keeps input without line breaks, /dev/zero or a binary file, from
  // taking all memory.
  auto dir = test::scratch_dir("input_lines_too_long");
  write_bytes(dir + "/a.txt", "short\n" + std::string(100'000, 'a') + "\nafter");
  const auto read = [&](std::size_t longest) {
    InputLines lines({dir + "/a.txt"}, 4096, longest);
    InputLine line;
    while (lines.next(line)) {
    }
  };
  read(100'000);  // a line of exactly the limit is read
  CHECK(error_of([&] { read(50'000); }) ==
        dir + "/a.txt:2: no line break in 50000 bytes: not a file of JSON lines");
}

TEST_CASE("input patterns expand in sorted order and must match", "[tokenize]") {
  auto dir = test::scratch_dir("input_glob");
  for (const char* n : {"b.jsonl", "a.jsonl", "c.jsonl", "a.txt"}) write_bytes(dir + "/" + n, std::string(n) + "\n");
  auto paths = expand_input_paths({dir + "/*.jsonl", "-", dir + "/a.txt"});
  CHECK(paths == std::vector<std::string>{dir + "/a.jsonl", dir + "/b.jsonl", dir + "/c.jsonl", "-",
                                          dir + "/a.txt"});
  CHECK_THAT(error_of([&] { expand_input_paths({dir + "/*.nothing"}); }),
             Catch::Contains("no input file matches"));
  CHECK(total_input_size({dir + "/a.jsonl", dir + "/b.jsonl"}) == 16);
}

TEST_CASE("a pipe is read as it arrives, with no size for progress", "[tokenize]") {
  auto dir = test::scratch_dir("input_fifo");
  std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(total_input_size({fifo}) == 0);
  std::string payload = gzip_bytes(big_text());
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    for (std::size_t i = 0; i < payload.size(); i += 777) {
      out.write(payload.data() + i, static_cast<std::streamsize>(std::min<std::size_t>(777, payload.size() - i)));
      out.flush();
    }
  });
  std::atomic<bool> cancel{false};
  InputLines lines({fifo});
  lines.set_cancel_flag(&cancel);
  InputLine line;
  std::size_t count = 0;
  while (lines.next(line)) ++count;
  writer.join();
  CHECK(count == 20000);
  CHECK(lines.display_name(0) == fifo);
  CHECK(lines.stored_bytes_read() == payload.size());
}

TEST_CASE("a read waiting on a silent pipe gives up when cancelled", "[tokenize]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  REQUIRE(::write(fds[1], "line\n", 5) == 5);  // then the writer stays silent, the pipe open
  std::atomic<bool> cancel{false};
  InputLines lines({"/dev/fd/" + std::to_string(fds[0])});
  lines.set_cancel_flag(&cancel);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  InputLine line;
  std::string error = error_of([&] {
    while (lines.next(line)) {
    }
  });
  canceller.join();
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK_THAT(error, Catch::Contains("reading cancelled"));
}

TEST_CASE("standard input is named <stdin> in messages", "[tokenize]") {
  InputLines lines({"-", "x"});
  CHECK(lines.display_name(0) == "<stdin>");
  CHECK(lines.display_name(1) == "x");
}
