// A save killed with SIGKILL at any moment must leave the previous checkpoint loadable bit for
// bit and the tracker file valid. A forked child does the save; the parent kills it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::ckpt;

namespace {

const std::string kShard = "mp_rank_00.h5";

void save_state(const std::string& save, std::int64_t iteration, const ckpt_test::FakeState& state,
                const SaveOptions& options, std::chrono::microseconds pause_per_tensor) {
  IterationSave save_op(save, iteration, options);
  ShardWriter writer(save_op.staged_path(kShard), state.metadata, ShardWriterOptions{.max_chunk_bytes = 1 << 16});
  for (std::size_t i = 0; i < state.records.size(); ++i) {
    writer.write(state.records[i], state.contents[i]);
    std::this_thread::sleep_for(pause_per_tensor);
  }
  writer.close();
  save_op.commit();
}

// Runs `body` in a child process and returns how it ended: its exit code, or -signal.
template <typename Body>
int run_in_child(Body body, std::chrono::microseconds kill_after = std::chrono::microseconds::max()) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      body();
    } catch (...) {
      code = 3;
    }
    ::_exit(code);  // no Catch2 or static destructors in the child
  }
  if (kill_after != std::chrono::microseconds::max()) {
    std::this_thread::sleep_for(kill_after);
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

// After a killed or refused save of `iteration` into a SAVE whose tracker named
// `previous_iteration`: the tracker names one of the two and the checkpoint it names loads as
// exactly what was saved there. Returns the iteration found.
std::int64_t check_survivor(const std::string& save, std::int64_t previous_iteration,
                            const ckpt_test::FakeState& previous, std::int64_t iteration,
                            const ckpt_test::FakeState& next) {
  auto latest = latest_iteration(save);
  REQUIRE(latest);
  REQUIRE((*latest == previous_iteration || *latest == iteration));
  auto dir = find_latest_checkpoint_directory(save);
  REQUIRE(dir);
  ShardReader reader(*dir + "/" + kShard);
  CHECK_NOTHROW(reader.verify());
  if (*latest == iteration && iteration != previous_iteration) {
    CHECK(ckpt_test::shard_matches(reader, next));
  } else {  // the previous checkpoint, untouched (a committed iteration is never saved again)
    CHECK(ckpt_test::shard_matches(reader, previous));
  }
  return *latest;
}

// The next save after a crash succeeds and leaves no hidden leftovers.
void check_recovery(const std::string& save) {
  auto state = ckpt_test::make_fake_state(99, 1, 4);
  save_state(save, 99, state, {}, std::chrono::microseconds(0));
  for (const auto& e : std::filesystem::directory_iterator(save)) {
    INFO(e.path());
    CHECK(e.path().filename().string().front() != '.');
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  }
  CHECK(ckpt_test::shard_matches(ShardReader(*find_latest_checkpoint_directory(save) + "/" + kShard), state));
}

}  // namespace

TEST_CASE("a save killed at each publish step leaves a loadable checkpoint", "[ckpt]") {
  const auto previous = ckpt_test::make_fake_state(1, 2, 64);
  const auto next = ckpt_test::make_fake_state(2, 3, 64);
  for (SaveStep step : {SaveStep::StagingSynced, SaveStep::Published, SaveStep::TrackerWritten}) {
    DYNAMIC_SECTION("killed at " << save_step_name(step)) {
      auto save = test::scratch_dir("ckpt_crash_steps");
      save_state(save, 1, previous, {}, std::chrono::microseconds(0));
      SaveOptions options;
      options.on_step = [step](SaveStep reached) {
        if (reached == step) ::raise(SIGKILL);
      };
      int ended = run_in_child([&] { save_state(save, 2, next, options, std::chrono::microseconds(0)); });
      CHECK(ended == -SIGKILL);
      check_survivor(save, 1, previous, 2, next);
      check_recovery(save);
    }
  }
}

TEST_CASE("a save killed after its rename and before the tracker is resumed from", "[ckpt]") {
  const auto previous = ckpt_test::make_fake_state(1, 2, 64);
  const auto next = ckpt_test::make_fake_state(2, 3, 64);
  auto save = test::scratch_dir("ckpt_crash_tracker_behind");
  save_state(save, 1, previous, {}, std::chrono::microseconds(0));
  SaveOptions options;
  options.on_step = [](SaveStep reached) {
    if (reached == SaveStep::Published) ::raise(SIGKILL);
  };
  CHECK(run_in_child([&] { save_state(save, 2, next, options, std::chrono::microseconds(0)); }) == -SIGKILL);
  REQUIRE(latest_iteration(save) == 1);  // the window: iter_0000002 in place, the tracker behind
  const auto resume = find_checkpoint_to_resume(save);
  REQUIRE(resume);
  CHECK(resume->iteration == 2);
  CHECK(resume->directory == save + "/iter_0000002");
  CHECK_THAT(resume->note, Catch::Matchers::Contains("names iteration 1, but " + save + "/iter_0000002"));
  CHECK(ckpt_test::shard_matches(ShardReader(resume->directory + "/" + kShard), next));
  // The next save (of a later iteration) moves the tracker on.
  check_recovery(save);
  CHECK(latest_iteration(save) == 99);
}

TEST_CASE("a save of a committed iteration is refused before it writes anything", "[ckpt]") {
  const auto previous = ckpt_test::make_fake_state(1, 2, 64);
  const auto next = ckpt_test::make_fake_state(2, 3, 64);
  auto save = test::scratch_dir("ckpt_crash_resave");
  save_state(save, 1, previous, {}, std::chrono::microseconds(0));
  int ended = run_in_child([&] { save_state(save, 1, next, {}, std::chrono::microseconds(0)); });
  CHECK(ended == 3);  // the child's exception
  check_survivor(save, 1, previous, 1, next);
  CHECK(ckpt_test::shard_matches(ShardReader(save + "/iter_0000001/" + kShard), previous));
  check_recovery(save);
}

TEST_CASE("a save killed at random moments leaves a loadable checkpoint", "[ckpt]") {
  const auto previous = ckpt_test::make_fake_state(11, 4, 256);
  const auto next = ckpt_test::make_fake_state(12, 12, 256);  // 24 tensors of 64 KiB, written slowly
  std::mt19937 rng(20240611);
  // The child needs roughly 24 x 2 ms plus I/O; delays reach past that to catch the publish.
  std::uniform_int_distribution<int> delay_us(0, 90000);
  int killed = 0;
  for (int trial = 0; trial < 8; ++trial) {
    auto save = test::scratch_dir("ckpt_crash_random");
    save_state(save, 11, previous, {}, std::chrono::microseconds(0));
    int ended = run_in_child([&] { save_state(save, 12, next, {}, std::chrono::microseconds(2000)); },
                             std::chrono::microseconds(delay_us(rng)));
    if (ended == -SIGKILL) ++killed;
    else CHECK(ended == 0);
    check_survivor(save, 11, previous, 12, next);
    check_recovery(save);
  }
  CHECK(killed > 0);
}
