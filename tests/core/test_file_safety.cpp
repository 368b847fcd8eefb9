// Files mgt writes and reads: temporaries that nothing planted beforehand can redirect, and
// inputs that are refused at once, naming the path, when they are not what the reader can use.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/mapped_file.hpp"
#include "core/temporary_file.hpp"
#include "test_paths.hpp"

using namespace mgt;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
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

TEST_CASE("temporary names are unpredictable and beside the final file", "[core]") {
  const std::string dir = test::scratch_dir("temporary_names");
  const std::string final_path = dir + "/out.idx";
  std::set<std::string> names;
  for (int i = 0; i < 20; ++i) {
    TemporaryFile t = create_temporary_file(final_path);
    CHECK(t.fd >= 0);
    CHECK(fs::path(t.path).parent_path() == fs::path(dir));
    CHECK(t.path.rfind(final_path + ".tmp.", 0) == 0);
    CHECK(t.path.size() == final_path.size() + 5 + 12);
    names.insert(t.path);
    ::close(t.fd);
  }
  CHECK(names.size() == 20);
  CHECK(random_name_suffix(40).find_first_not_of(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos);
}

TEST_CASE("a symlink at a temporary's name is never followed", "[core]") {
  const std::string dir = test::scratch_dir("temporary_symlink");
  const std::string victim = dir + "/victim.txt";
  std::ofstream(victim) << "precious";

  // A link planted at the exact name is refused, not written through...
  const std::string planted = dir + "/out.txt.tmp.AAAAAAAAAAAA";
  fs::create_symlink(victim, planted);
  CHECK_THROWS_AS(create_exclusive_file(planted), Error);
  // ... and so is a dangling one (O_CREAT alone would create its target).
  const std::string dangling = dir + "/dangling";
  fs::create_symlink(dir + "/created-through-link", dangling);
  CHECK_THROWS_AS(create_exclusive_file(dangling), Error);
  CHECK_FALSE(fs::exists(dir + "/created-through-link"));

  // AtomicFile writes only files it created itself, and its rename replaces a link at the final
  // name with a regular file instead of writing into the link's target.
  const std::string final_path = dir + "/out.txt";
  fs::create_symlink(victim, final_path);
  {
    AtomicFile f(final_path);
    CHECK(f.temp_path() != planted);
    f.write("fresh");
    f.commit();
  }
  CHECK(read_all(victim) == "precious");
  CHECK(fs::is_regular_file(fs::symlink_status(final_path)));
  CHECK(read_all(final_path) == "fresh");
  CHECK(fs::is_symlink(fs::symlink_status(planted)));  // left alone
}

TEST_CASE("reserve_temporary_path leaves an empty file for a library to open by name", "[core]") {
  const std::string dir = test::scratch_dir("temporary_reserve");
  const std::string path = reserve_temporary_path(dir + "/mp_rank_00.h5", 0640);
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(st.st_size == 0);
  CHECK((st.st_mode & 0077 & ~0640) == 0);  // never more than asked
  const std::string staging = create_temporary_directory(dir + "/export");
  CHECK(fs::is_directory(staging));
  CHECK(staging.rfind(dir + "/export.partial.", 0) == 0);
}

TEST_CASE("inputs that are not regular files are refused at once, naming the path", "[core]") {
  const std::string dir = test::scratch_dir("input_kinds");
  const std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: opening it for reading must not wait for one.
  CHECK(error_of([&] { MappedFile m(fifo); }) == "'" + fifo + "' is a FIFO, not a regular file");
  CHECK(error_of([&] { read_input_file(fifo, "GPT-2 vocab file"); }) ==
        "GPT-2 vocab file '" + fifo + "' is a FIFO, not a regular file");
  CHECK(error_of([&] { MappedFile m(dir); }) == "'" + dir + "' is a directory, not a regular file");
  CHECK(error_of([&] { MappedFile m("/dev/null"); }) == "'/dev/null' is a character device, not a regular file");
  CHECK(error_of([&] { require_regular_input_file(fifo); }) == "'" + fifo + "' is a FIFO, not a regular file");
  CHECK_THAT(error_of([&] { InputFile f(dir + "/missing", InputKind::kRegularFile, "input"); }),
             Catch::StartsWith("cannot open input '" + dir + "/missing': "));

  // A stream may be a FIFO or a device, never a directory.
  { InputFile f(fifo, InputKind::kStream); CHECK_FALSE(f.regular()); }
  { InputFile f("/dev/null", InputKind::kStream); CHECK_FALSE(f.regular()); }
  CHECK(error_of([&] { InputFile f(dir, InputKind::kStream, "input"); }) ==
        "input '" + dir + "' is a directory, not a file to read");

  const std::string regular = dir + "/plain.txt";
  std::ofstream(regular) << "abc";
  CHECK(read_input_file(regular) == "abc");
  CHECK(InputFile(regular).size() == 3);
}
