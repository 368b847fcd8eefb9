#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt_testing.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::ckpt;
using Catch::Matchers::Contains;

namespace {

const std::string kShard = "mp_rank_00.h5";

void save_state(const std::string& save, std::int64_t iteration, const ckpt_test::FakeState& state,
                SaveOptions options = {}) {
  IterationSave save_op(save, iteration, std::move(options));
  ShardWriter writer(save_op.staged_path(kShard), state.metadata);
  ckpt_test::write_fake_state(writer, state);
  writer.close();
  save_op.commit();
}

bool latest_matches(const std::string& save, const ckpt_test::FakeState& state) {
  auto dir = find_latest_checkpoint_directory(save);
  return dir && ckpt_test::shard_matches(ShardReader(*dir + "/" + kShard), state);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

unsigned mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Sets the process umask for one scope.
class ScopedUmask {
public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(previous_); }

private:
  mode_t previous_;
};

}  // namespace

TEST_CASE("a committed iteration is never saved again", "[ckpt]") {
  auto save = test::scratch_dir("ckpt_resave");
  auto first = ckpt_test::make_fake_state(1, 2, 8);
  auto second = ckpt_test::make_fake_state(2, 3, 8);
  save_state(save, 50, first);
  CHECK_THROWS_WITH(save_state(save, 50, second),
                    Contains(save + "/iter_0000050 already exists") && Contains("never replaced"));
  CHECK(latest_matches(save, first));
  CHECK(entries(save) == std::vector<std::string>{"iter_0000050", "latest_checkpointed_iteration.txt"});

  // An entry that appears under the final name while the save is staged is not replaced either,
  // not even an empty directory (which rename(2) alone would replace).
  auto staging = prepare_staging_directory(save, 60);
  {
    ShardWriter writer(staging + "/" + kShard, second.metadata);
    ckpt_test::write_fake_state(writer, second);
    writer.close();
  }
  std::filesystem::create_directory(save + "/iter_0000060");
  CHECK_THROWS_WITH(publish_iteration(save, 60, staging), Contains("iter_0000060 already exists"));
  CHECK(std::filesystem::is_empty(save + "/iter_0000060"));
  CHECK(std::filesystem::exists(staging + "/" + kShard));  // the caller's to remove
  CHECK(latest_iteration(save) == 50);
}

TEST_CASE("an abandoned save leaves nothing and the next save cleans crash leftovers", "[ckpt]") {
  auto save = test::scratch_dir("ckpt_leftovers");
  auto state = ckpt_test::make_fake_state(3, 1, 4);
  save_state(save, 10, state);
  {
    IterationSave abandoned(save, 20);
    ShardWriter writer(abandoned.staged_path(kShard), state.metadata);
    CHECK(std::filesystem::exists(abandoned.staging_dir()));
  }  // destroyed without commit
  CHECK(entries(save) == std::vector<std::string>{"iter_0000010", "latest_checkpointed_iteration.txt"});

  // What a killed save leaves: a staging directory, a tracker temporary, and (killed between the
  // two renames of a replacement) an iteration present only under its aside name.
  std::filesystem::create_directories(save + "/.iter_0000020.tmp-999999/sub");
  std::ofstream(save + "/.iter_0000020.tmp-999999/mp_rank_00.h5") << "partial";
  std::ofstream(save + "/latest_checkpointed_iteration.txt.tmp.999999") << "2";
  std::filesystem::rename(save + "/iter_0000010", save + "/.iter_0000010.old");
  CHECK(latest_matches(save, state));  // readers find the aside copy meanwhile

  auto next = ckpt_test::make_fake_state(4, 1, 4);
  save_state(save, 30, next);
  CHECK(entries(save) ==
        std::vector<std::string>{"iter_0000010", "iter_0000030", "latest_checkpointed_iteration.txt"});
  CHECK(latest_matches(save, next));
  CHECK(ckpt_test::shard_matches(ShardReader(save + "/iter_0000010/" + kShard), state));
}

TEST_CASE("a save that fails mid-publish keeps the previous checkpoint", "[ckpt]") {
  for (SaveStep failing : {SaveStep::StagingSynced, SaveStep::Published}) {
    DYNAMIC_SECTION("failing at " << save_step_name(failing)) {
      auto save = test::scratch_dir("ckpt_publish_failure");
      auto first = ckpt_test::make_fake_state(5, 1, 4);
      auto second = ckpt_test::make_fake_state(6, 1, 4);
      save_state(save, 60, first);
      SaveOptions options;
      options.on_step = [&](SaveStep step) {
        if (step == failing) throw Error("disk on fire");
      };
      CHECK_THROWS_WITH(save_state(save, 70, second, options), "disk on fire");
      // All or nothing: an iteration the tracker does not name is taken back, so that it does
      // not stand in the way of saving it again.
      CHECK(latest_iteration(save) == 60);
      CHECK(latest_matches(save, first));
      CHECK(entries(save) == std::vector<std::string>{"iter_0000060", "latest_checkpointed_iteration.txt"});
      save_state(save, 70, second);
      CHECK(latest_matches(save, second));
      CHECK(entries(save) ==
            std::vector<std::string>{"iter_0000060", "iter_0000070", "latest_checkpointed_iteration.txt"});
    }
  }
}

TEST_CASE("checkpoint files are 0640 and directories 0750 within the umask", "[ckpt]") {
  struct Case {
    mode_t umask;
    unsigned file_mode;
    unsigned dir_mode;
  };
  for (const auto& c : {Case{022, 0640, 0750}, Case{027, 0640, 0750}, Case{077, 0600, 0700}, Case{0, 0640, 0750}}) {
    DYNAMIC_SECTION("umask " << std::oct << c.umask) {
      auto save = test::scratch_dir("ckpt_modes") + "/nested/run";
      {
        ScopedUmask scoped(c.umask);
        save_state(save, 1, ckpt_test::make_fake_state(1, 1, 2));
      }
      CHECK(mode_of(save) == c.dir_mode);
      CHECK(mode_of(save + "/..") == c.dir_mode);  // created parents too
      CHECK(mode_of(save + "/iter_0000001") == c.dir_mode);
      CHECK(mode_of(save + "/iter_0000001/" + kShard) == c.file_mode);
      CHECK(mode_of(tracker_file_path(save)) == c.file_mode);
    }
  }
}

TEST_CASE("staging tokens let several ranks share one staging directory", "[ckpt]") {
  auto save = test::scratch_dir("ckpt_token");
  SaveOptions options;
  options.staging_token = "job42";
  auto staging = prepare_staging_directory(save, 5, options);
  CHECK(std::filesystem::path(staging).filename() == ".iter_0000005.tmp-job42");
  CHECK(staging == staging_directory(save, 5, "job42"));  // what the other ranks compute
  auto state = ckpt_test::make_fake_state(9, 1, 2);
  state.metadata.world.tensor_model_parallel_size = 2;
  for (int tp = 0; tp < 2; ++tp) {  // as if written by two ranks
    state.metadata.world.tensor_model_parallel_rank = tp;
    ShardWriter writer(staging + "/" + shard_file_name(ShardId{tp, {}, {}}), state.metadata);
    ckpt_test::write_fake_state(writer, state);
    writer.close();
  }
  publish_iteration(save, 5, staging, options);
  CHECK(list_shard_files(save + "/iter_0000005").size() == 2);
  options.staging_token = "a/b";
  CHECK_THROWS_WITH(prepare_staging_directory(save, 6, options), Contains("must not contain '/'"));
}
