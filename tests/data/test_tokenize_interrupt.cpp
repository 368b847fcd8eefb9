#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "data/tokenize_job.hpp"
#include "test_paths.hpp"
#include "tokenize_testing.hpp"

using namespace mgt;
using test::files_in;
using test::null_options;
namespace fs = std::filesystem;

namespace {

// The error the run ends with.
template <class Fn>
Error failure_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no error");
  return Error("");
}

}  // namespace

TEST_CASE("tokenize interrupt: a raised flag stops the run before any output", "[tokenize]") {
  const std::string dir = test::scratch_dir("tokenize_interrupt_raised");
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"1 2 3\"}\n{\"text\": \"4 5\"}\n";
  std::atomic<int> interrupt{SIGTERM};
  const Error e = failure_of([&] { run_tokenize(null_options(dir + "/in.jsonl", dir + "/out"), &interrupt); });
  CHECK(std::string(e.what()) == "interrupted by SIGTERM; no output written");
  CHECK(e.exit_code() == 128 + SIGTERM);
  CHECK(files_in(dir) == std::set<std::string>{"in.jsonl"});

  // Without a signal the same run completes.
  interrupt = 0;
  run_tokenize(null_options(dir + "/in.jsonl", dir + "/out"), &interrupt);
  CHECK(files_in(dir).count("out_text_document.idx") == 1);
}

TEST_CASE("tokenize interrupt: a run waiting on a silent pipe stops and cleans up", "[tokenize]") {
  const std::string dir = test::scratch_dir("tokenize_interrupt_pipe");
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::atomic<int> interrupt{0};
  bool written = true;
  // Some lines, then silence with the pipe held open: the run waits for more input.
  std::thread writer([&] {
    const std::string lines = "{\"text\": \"1 2 3\"}\n{\"text\": \"4 5\"}\n";
    for (int i = 0; i < 100; ++i)
      written = written && ::write(fds[1], lines.data(), lines.size()) == static_cast<ssize_t>(lines.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    interrupt = SIGINT;
  });
  TokenizeOptions o = null_options("/dev/fd/" + std::to_string(fds[0]), dir + "/out");
  o.batch_bytes = 64;  // several batches already written when the signal comes
  const auto start = std::chrono::steady_clock::now();
  const Error e = failure_of([&] { run_tokenize(o, &interrupt); });
  writer.join();
  ::close(fds[1]);
  ::close(fds[0]);
  CHECK(written);
  CHECK(std::string(e.what()) == "interrupted by SIGINT; no output written");
  CHECK(e.exit_code() == 130);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK(files_in(dir).empty());
}

TEST_CASE("merge interrupt: a raised flag leaves no merged dataset", "[tokenize]") {
  const std::string dir = test::scratch_dir("merge_interrupt");
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"1 2 3\"}\n";
  run_tokenize(null_options(dir + "/in.jsonl", dir + "/a"));
  const std::set<std::string> before = files_in(dir);
  TokenizeOptions m;
  m.merge = true;
  m.quiet = true;
  m.inputs = {dir + "/a_text_document"};
  m.output_prefix = dir + "/merged";
  std::atomic<int> interrupt{SIGHUP};
  const Error e = failure_of([&] { run_merge(m, &interrupt); });
  CHECK(std::string(e.what()) == "interrupted by SIGHUP; no output written");
  CHECK(e.exit_code() == 128 + SIGHUP);
  CHECK(files_in(dir) == before);
}
