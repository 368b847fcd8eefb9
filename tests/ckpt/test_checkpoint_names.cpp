// The names a checkpoint save reads and writes cannot be hijacked: a FIFO at the tracker's name is
// refused instead of blocking the run, and checkpoint files are never created through a symlink.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint_files.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace mgt;
using mgt::test::scratch_dir;
using Catch::Matchers::Contains;

TEST_CASE("a FIFO at the tracker file's name is refused at once", "[ckpt]") {
  const std::string dir = scratch_dir("ckpt-tracker-fifo");
  REQUIRE(::mkfifo(ckpt::tracker_file_path(dir).c_str(), 0600) == 0);
  CHECK_THROWS_WITH(ckpt::read_tracker_file(dir), Contains("FIFO") && Contains("latest_checkpointed_iteration.txt"));
}

TEST_CASE("checkpoint files are never created through a symlink or over a file", "[ckpt]") {
  const std::string dir = scratch_dir("ckpt-file-symlink");
  const std::string target = dir + "/target";
  std::ofstream(target) << "keep";
  std::filesystem::create_symlink(target, dir + "/mp_rank_00.h5");
  CHECK_THROWS_AS(ckpt::create_checkpoint_file(dir + "/mp_rank_00.h5"), Error);
  std::ifstream in(target);
  std::string text;
  in >> text;
  CHECK(text == "keep");
  CHECK_THROWS_AS(ckpt::create_checkpoint_file(target), Error);
}
