// One writer per save directory (SaveDirectoryLock), finding the newest complete iteration when
// the tracker file is gone, a writer that hits a write error, and how little a shard adds to
// the bytes of its tensors.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/save_directory_lock.hpp"
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

std::string host_name() {
  char buffer[256] = {};
  REQUIRE(::gethostname(buffer, sizeof buffer - 1) == 0);
  return buffer;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void save_state(const std::string& save, std::int64_t iteration, const ckpt_test::FakeState& state) {
  IterationSave save_op(save, iteration);
  ShardWriter writer(save_op.staged_path("mp_rank_00.h5"), state.metadata);
  ckpt_test::write_fake_state(writer, state);
  writer.close();
  save_op.commit();
}

ckpt_test::FakeState state_of_iteration(std::int64_t iteration) {
  auto state = ckpt_test::make_fake_state(static_cast<std::uint64_t>(iteration), 2, 16);
  state.metadata.iteration = iteration;
  return state;
}

// Waits for a forked child and returns its exit code, or -signal.
int wait_for(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("a save directory has one writer at a time", "[ckpt]") {
  const auto save = test::scratch_dir("ckpt_lock") + "/run";  // created by the lock
  const std::string lock_file = save + "/.mgt-writer.lock";
  {
    SaveDirectoryLock lock(save);
    CHECK(lock.held());
    CHECK(lock.directory() == save);
    CHECK(save_lock_file_path(save) == lock_file);
    CHECK(read_text(lock_file) == "host=" + host_name() + " pid=" + std::to_string(::getpid()) + "\n");
    // Any other open of the lock file is another writer, this process included.
    CHECK_THROWS_WITH(SaveDirectoryLock(save),
                      Contains("checkpoint directory " + save + " is being written by another process (host " +
                               host_name() + ", pid " + std::to_string(::getpid()) + ")"));
    SaveDirectoryLock moved(std::move(lock));
    CHECK(moved.held());
    CHECK_FALSE(lock.held());
    CHECK_THROWS(SaveDirectoryLock(save));
  }
  SaveDirectoryLock again(save);  // released with its holder
  CHECK(again.held());
  again.release();
  CHECK_FALSE(again.held());
  CHECK(std::filesystem::exists(lock_file));  // the file stays; only the lock goes
  SaveDirectoryLock third(save);
  CHECK(third.held());
}

TEST_CASE("a writer killed with SIGKILL leaves no lock behind", "[ckpt]") {
  const auto save = test::scratch_dir("ckpt_lock_kill");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      SaveDirectoryLock lock(save);
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      ::pause();  // holds the lock until killed
    } catch (...) {
    }
    ::_exit(3);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  CHECK_THROWS_WITH(SaveDirectoryLock(save), Contains("pid " + std::to_string(child) + ")"));
  ::kill(child, SIGKILL);
  CHECK(wait_for(child) == -SIGKILL);
  SaveDirectoryLock lock(save);
  CHECK(lock.held());
  CHECK(read_text(save + "/.mgt-writer.lock").find("pid=" + std::to_string(::getpid())) != std::string::npos);
}

TEST_CASE("iteration directories are listed by their canonical names", "[ckpt]") {
  CHECK(parse_iteration_directory_name("iter_0000010") == 10);
  CHECK(parse_iteration_directory_name("iter_12345678") == 12345678);
  CHECK_FALSE(parse_iteration_directory_name("iter_10"));
  CHECK_FALSE(parse_iteration_directory_name("iter_+000010"));
  CHECK_FALSE(parse_iteration_directory_name(".iter_0000010.tmp-5"));
  CHECK_FALSE(parse_iteration_directory_name("iter_0000010.old"));
  CHECK_FALSE(parse_iteration_directory_name("release"));

  const auto save = test::scratch_dir("ckpt_list_iterations");
  CHECK(list_iteration_directories(save + "/missing").empty());
  for (const char* name : {"iter_0000030", "iter_0000004", ".iter_0000050.tmp-1", "iter_7", "notes"})
    std::filesystem::create_directory(save + "/" + name);
  std::ofstream(save + "/iter_0000060") << "a file, not a checkpoint";
  CHECK(list_iteration_directories(save) == std::vector<std::int64_t>{4, 30});
}

TEST_CASE("without a tracker file the newest complete iteration is found", "[ckpt]") {
  const auto save = test::scratch_dir("ckpt_newest_complete");
  CHECK_FALSE(find_newest_complete_iteration(save).complete);
  CHECK(find_newest_complete_iteration(save).skipped.empty());
  for (std::int64_t iteration : {10, 20, 30, 40}) save_state(save, iteration, state_of_iteration(iteration));
  std::filesystem::remove(tracker_file_path(save));

  auto found = find_newest_complete_iteration(save);
  REQUIRE(found.complete);
  CHECK(found.complete->iteration == 40);
  CHECK(found.complete->directory == save + "/iter_0000040");
  CHECK(found.skipped.empty());

  // Damaged in three ways: truncated, a shard of another iteration, no shard at all.
  std::filesystem::resize_file(save + "/iter_0000040/mp_rank_00.h5", 2000);
  std::filesystem::copy_file(save + "/iter_0000010/mp_rank_00.h5", save + "/iter_0000030/mp_rank_00.h5",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(save + "/iter_0000020/mp_rank_00.h5");
  found = find_newest_complete_iteration(save);
  REQUIRE(found.complete);
  CHECK(found.complete->iteration == 10);
  REQUIRE(found.skipped.size() == 3);
  CHECK(found.skipped[0].iteration == 40);
  CHECK_THAT(found.skipped[0].problem, Contains("mp_rank_00.h5"));
  CHECK_THAT(found.skipped[1].problem, Contains("mp_rank_00.h5 is of iteration 10"));
  CHECK_THAT(found.skipped[2].problem, Contains("holds no mp_rank_00.h5"));
  CHECK(iteration_directory_problem(save + "/iter_0000010", 10).empty());

  // A corrupted tensor fails its checksum.
  const std::string shard = save + "/iter_0000010/mp_rank_00.h5";
  std::vector<StoredChunk> chunks;
  {
    const ShardReader reader(shard);
    chunks = reader.stored_chunks(reader.tensors().front().name);
  }
  REQUIRE_FALSE(chunks.empty());
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(chunks[0].file_offset + 3));
    f.put('\x5a');
  }
  CHECK_THAT(iteration_directory_problem(save + "/iter_0000010", 10), Contains("Fletcher32"));
  CHECK_FALSE(find_newest_complete_iteration(save).complete);
}

TEST_CASE("a complete iteration newer than the tracker's is the one to resume", "[ckpt]") {
  const auto save = test::scratch_dir("ckpt_tracker_behind");
  CHECK_FALSE(find_checkpoint_to_resume(save));
  for (std::int64_t iteration : {10, 20}) save_state(save, iteration, state_of_iteration(iteration));
  auto found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->directory == save + "/iter_0000020");
  CHECK(found->iteration == 20);
  CHECK(found->note.empty());

  // A tracker set back after iteration 20 was written (a rollback, or another run's save into
  // the same directory) names what is resumed.
  write_tracker_file(save, 10);
  found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->directory == save + "/iter_0000010");
  CHECK_THAT(found->note, Contains(tracker_file_path(save) + " names iteration 10; " + save +
                                   "/iter_0000020, a complete checkpoint of iteration 20, was written before the "
                                   "tracker last moved") &&
                              Contains("not resumed"));

  // The tracker one save behind, as a save killed between its rename and the tracker leaves it:
  // older than the directory the killed save renamed into place.
  const auto behind = [&] {
    std::filesystem::last_write_time(tracker_file_path(save),
                                     std::filesystem::last_write_time(save + "/iter_0000010"));
  };
  behind();
  found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->directory == save + "/iter_0000020");
  CHECK(found->iteration == 20);
  CHECK_THAT(found->note, Contains(tracker_file_path(save) + " names iteration 10, but " + save +
                                   "/iter_0000020 is a newer complete checkpoint") &&
                              Contains("resuming from iteration 20"));

  // A newer directory that is not a checkpoint is passed over, and said so.
  std::filesystem::create_directory(save + "/iter_0000030");
  found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->iteration == 20);
  CHECK_THAT(found->note, Contains(save + "/iter_0000030 is not complete: it holds no mp_rank_00.h5"));
  write_tracker_file(save, 20);
  found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->directory == save + "/iter_0000020");
  CHECK_THAT(found->note, Contains("names iteration 20; newer iteration directories are not resumed") &&
                              Contains(save + "/iter_0000030 is not complete"));
  std::filesystem::remove(save + "/iter_0000030");

  // A release checkpoint counts as iteration 0.
  {
    std::filesystem::create_directory(save + "/release");
    std::ofstream(tracker_file_path(save)) << "release";
  }
  behind();
  found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->iteration == 20);
  CHECK_THAT(found->note, Contains("names the release checkpoint, but " + save + "/iter_0000020"));

  // Without a tracker: the newest directory whose checksums pass, as before.
  std::filesystem::remove(tracker_file_path(save));
  found = find_checkpoint_to_resume(save);
  REQUIRE(found);
  CHECK(found->iteration == 20);
  CHECK_THAT(found->note, Contains(save + " has no latest_checkpointed_iteration.txt: resuming from " + save +
                                   "/iter_0000020, its newest complete checkpoint (iteration 20)"));
}

TEST_CASE("a shard writer that cannot write says why and HDF5 shuts down cleanly", "[ckpt]") {
  // The disk "fills" at 64 KiB: RLIMIT_FSIZE makes larger writes fail (EFBIG), like ENOSPC. In a
  // child process, which then runs HDF5's shutdown: HDF5's own driver would leave a file ID
  // that crashes it.
  const auto dir = test::scratch_dir("ckpt_write_failure");
  const std::string path = dir + "/mp_rank_00.h5";
  const auto state = ckpt_test::make_fake_state(7, 4, 256);  // 8 tensors of 64 KiB
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 10;
    try {
      ShardWriter writer(path, state.metadata, ShardWriterOptions{.max_chunk_bytes = 1 << 14});
      ckpt_test::write_fake_state(writer, state);
      writer.close();
    } catch (const Error& e) {
      const std::string message = e.what();
      const bool expected = message == "cannot write checkpoint file '" + path + "': write failed: File too large";
      code = expected ? 0 : 11;
      if (!expected) std::fprintf(stderr, "unexpected message: %s\n", message.c_str());
    }
    if (H5close() < 0) code = 12;
    ::_exit(code);
  }
  CHECK(wait_for(child) == 0);
}

TEST_CASE("a shard stores its tensors with little beyond their bytes", "[ckpt]") {
  // An embedding-like tensor whose rows do not fill a whole number of full-size chunks: HDF5
  // stores every chunk whole, so the chunks are cut into equal parts instead.
  const auto dir = test::scratch_dir("ckpt_overhead");
  const std::string path = dir + "/mp_rank_00.h5";
  const auto record = TensorRecord::whole("model/embedding.word_embeddings.weight", TensorDType::Float32, {5030, 128});
  const auto bytes = ckpt_test::pseudo_random_bytes(record.byte_size(), 3);
  {
    ShardWriter writer(path, CheckpointMetadata{}, ShardWriterOptions{.max_chunk_bytes = 1 << 20});
    writer.write(record, bytes);
    writer.close();
  }
  const ShardReader reader(path);
  const auto chunks = reader.stored_chunks(record.name);
  REQUIRE(chunks.size() == 3);  // 2048 rows fit in 1 MiB: 3 chunks of 1677 rows
  std::uint64_t stored = 0;
  for (const auto& c : chunks) stored += c.size;
  CHECK(stored <= bytes.size() + 2 * 128 * 4 + 3 * 4);  // at most two spare rows and the checksums
  CHECK(std::filesystem::file_size(path) < bytes.size() + bytes.size() / 50);
  CHECK(reader.read_bytes(record.name) == bytes);
}
