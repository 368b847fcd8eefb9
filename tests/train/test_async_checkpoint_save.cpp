// --async-save's finalization (train/async_checkpoint_save.hpp) on one rank: nothing is published
// while the background writer runs, a finished write is published by the next finalize, a failed
// one fails it with the file's name and leaves the previous checkpoint the latest, and a save
// never finalized leaves no trace but its absence. Then a training run with --async-save saves the
// same checkpoints, tensor for tensor, as one without.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "core/error.hpp"
#include "dist/local_communicator.hpp"
#include "test_paths.hpp"
#include "train/async_checkpoint_save.hpp"
#include "trainer_testing.hpp"

using namespace mgt;

namespace {

std::vector<ckpt::ShardFileSnapshot> small_files(std::int64_t iteration, const std::string& name = "mp_rank_00.h5") {
  ckpt::ShardFileSnapshot file;
  file.file_name = name;
  file.metadata.iteration = iteration;
  file.tensors.push_back({ckpt::TensorRecord::whole("model/w", ckpt::TensorDType::Float32, {2, 3}),
                          ckpt::HostBytes(std::vector<float>{1, 2, 3, 4, 5, 6})});
  std::vector<ckpt::ShardFileSnapshot> files;
  files.push_back(std::move(file));
  return files;
}

bool has_staging_directory(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (ckpt::is_interrupted_save_leftover(entry.path().filename().string())) return true;
  return false;
}

}  // namespace

TEST_CASE("async checkpoint save: published only once the background write has finished", "[ckpt][async]") {
  const std::string dir = test::scratch_dir("async_save_publish");
  dist::LocalCommunicator world{"world", 0, nullptr, nullptr};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ckpt::SnapshotWriteOptions hold;
  hold.before_close = [released](const std::string&) { released.wait(); };

  AsyncCheckpointSave save(std::make_unique<CollectiveSave>(dir, 7, world), small_files(7), 0.5, hold);
  CHECK(save.iteration() == 7);
  CHECK_FALSE(save.try_finalize(world, false));  // the writer is held before closing its file
  CHECK_FALSE(save.try_finalize(world, false));
  CHECK_FALSE(ckpt::latest_iteration(dir));
  CHECK_FALSE(std::filesystem::exists(ckpt::iteration_directory(dir, 7)));
  CHECK(has_staging_directory(dir));

  release.set_value();
  while (!save.written()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::optional<SavedTrainCheckpoint> saved = save.try_finalize(world, false);
  REQUIRE(saved);
  CHECK(saved->directory == ckpt::iteration_directory(dir, 7));
  CHECK(ckpt::latest_iteration(dir) == 7);
  CHECK_FALSE(has_staging_directory(dir));
  REQUIRE(saved->ranks.size() == 1);
  CHECK(saved->ranks[0].bytes == std::filesystem::file_size(saved->directory + "/mp_rank_00.h5"));
  CHECK(saved->ranks[0].copy_seconds == 0.5);
  CHECK(ckpt::ShardedCheckpoint(saved->directory).read_whole_bytes("model/w").size() == 6 * sizeof(float));
}

TEST_CASE("async checkpoint save: a blocking finalize waits for the writer", "[ckpt][async]") {
  const std::string dir = test::scratch_dir("async_save_blocking");
  dist::LocalCommunicator world{"world", 0, nullptr, nullptr};
  ckpt::SnapshotWriteOptions slow;
  slow.before_close = [](const std::string&) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); };
  AsyncCheckpointSave save(std::make_unique<CollectiveSave>(dir, 3, world), small_files(3), 0.0, slow);
  REQUIRE(save.try_finalize(world, true));
  CHECK(ckpt::latest_iteration(dir) == 3);
}

TEST_CASE("async checkpoint save: a failed background write names the file and keeps the previous checkpoint",
          "[ckpt][async]") {
  const std::string dir = test::scratch_dir("async_save_failure");
  dist::LocalCommunicator world{"world", 0, nullptr, nullptr};
  REQUIRE(AsyncCheckpointSave(std::make_unique<CollectiveSave>(dir, 1, world), small_files(1), 0.0)
              .try_finalize(world, true));
  {
    // A file in a directory that does not exist: the writer cannot create it.
    AsyncCheckpointSave save(std::make_unique<CollectiveSave>(dir, 2, world), small_files(2, "missing/mp_rank_00.h5"),
                             0.0);
    try {
      save.try_finalize(world, true);
      FAIL("a failed write was finalized");
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(message.find("checkpoint of iteration 2 not saved") != std::string::npos);
      CHECK(message.find("missing/mp_rank_00.h5") != std::string::npos);
      CHECK(message.find("the last checkpoint (iteration 1 in " + dir + ") is intact") != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  CHECK(ckpt::latest_iteration(dir) == 1);
  CHECK_FALSE(std::filesystem::exists(ckpt::iteration_directory(dir, 2)));
  CHECK_FALSE(has_staging_directory(dir));
}

TEST_CASE("async checkpoint save: a save never finalized is abandoned without a trace", "[ckpt][async]") {
  const std::string dir = test::scratch_dir("async_save_abandoned");
  dist::LocalCommunicator world{"world", 0, nullptr, nullptr};
  { AsyncCheckpointSave save(std::make_unique<CollectiveSave>(dir, 5, world), small_files(5), 0.0); }
  CHECK_FALSE(ckpt::latest_iteration(dir));
  CHECK_FALSE(std::filesystem::exists(ckpt::iteration_directory(dir, 5)));
  CHECK_FALSE(has_staging_directory(dir));
}

TEST_CASE("trainer: --async-save saves the checkpoints a synchronous save does", "[trainer][async]") {
  using namespace mgt::trainer_test;
  TrainerFixture f("trainer_async_save");
  const std::vector<std::string> common = {"--train-iters", "6", "--save-interval", "3",
                                           "--use-distributed-optimizer"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  RunCapture sync;
  run(f.options(with({"--save", f.dir + "/sync"})), sync);
  RunCapture async;
  run(f.options(with({"--save", f.dir + "/async", "--async-save"})), async);

  CHECK(losses_of(async) == losses_of(sync));
  CHECK(ckpt::latest_iteration(f.dir + "/async") == 6);
  const std::string log = async.out.str();
  CHECK(lines_containing(log, "copied to host memory; its files are written in the background").size() == 2);
  CHECK(lines_containing(log, "successfully saved checkpoint from iteration").size() == 2);
  CHECK(lines_containing(log, "checkpoint write [rank 0/1]: ").size() == 2);
  CHECK(lines_containing(log, "GB/s aggregate (iteration 3, in the background)").size() == 1);
  CHECK(lines_containing(sync.out.str(), "GB/s aggregate (iteration 3)").size() == 1);

  for (std::int64_t iteration : {3, 6}) {
    const ckpt::ShardedCheckpoint a(ckpt::iteration_directory(f.dir + "/async", iteration));
    const ckpt::ShardedCheckpoint s(ckpt::iteration_directory(f.dir + "/sync", iteration));
    REQUIRE(a.tensor_names() == s.tensor_names());
    CHECK(a.tensor_names().size() > 10);
    for (const std::string& name : s.tensor_names()) {
      INFO(name);
      CHECK(a.read_whole_bytes(name) == s.read_whole_bytes(name));
    }
    // The same bookkeeping; the arguments differ in --async-save and --save alone.
    ckpt::CheckpointMetadata am = a.metadata();
    const ckpt::CheckpointMetadata& sm = s.metadata();
    const auto replace = [&](const std::string& from, const std::string& to) {
      const auto at = am.args_json.find(from);
      REQUIRE(at != std::string::npos);
      am.args_json.replace(at, from.size(), to);
    };
    replace("\"async_save\": true", "\"async_save\": false");
    replace(f.dir + "/async", f.dir + "/sync");
    CHECK(am.args_json == sm.args_json);
    CHECK(am == sm);
  }
}
