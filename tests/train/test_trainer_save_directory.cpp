// The --save directory: one writer, committed iterations never written over, a lost tracker
// file resumed from the newest complete iteration, and no stored copy of the fp32 weights twice.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/save_directory_lock.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"
#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;
using Catch::Matchers::Contains;

namespace {


std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string error_of(const TrainOptions& options, RunCapture& capture) {
  try {
    run(options, capture);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitFailure);
    return e.what();
  }
  FAIL("the run did not fail");
  return {};
}

}  // namespace

TEST_CASE("trainer: a --save directory another process writes to is refused", "[trainer]") {
  TrainerFixture f("trainer_save_locked");
  const std::string save = f.dir + "/ckpt";
  ckpt::SaveDirectoryLock other(save);
  std::filesystem::create_directory(save + "/.iter_0000002.tmp-424242");  // as if the other were saving
  RunCapture c;
  const std::string message = error_of(f.options({"--train-iters", "2", "--save", save, "--save-interval", "1"}), c);
  CHECK_THAT(message, Contains("checkpoint directory " + save + " is being written by another process") &&
                          Contains("pid " + std::to_string(::getpid())));
  CHECK(c.records.empty());
  CHECK(std::filesystem::exists(save + "/.iter_0000002.tmp-424242"));  // not the refused run's to clear
  CHECK_FALSE(ckpt::latest_iteration(save));
  other.release();
  RunCapture after;
  run(f.options({"--train-iters", "2", "--save", save, "--save-interval", "1"}), after);
  CHECK_FALSE(std::filesystem::exists(save + "/.iter_0000002.tmp-424242"));  // cleared under the lock
  CHECK(ckpt::latest_iteration(save) == 2);
}

TEST_CASE("trainer: a lost tracker file resumes from the newest complete iteration, exactly", "[trainer]") {
  TrainerFixture f("trainer_no_tracker");
  const std::vector<std::string> common = {"--train-iters", "6", "--save-interval", "2", "--eval-iters", "0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  RunCapture straight;
  run(f.options(with({"--save", f.dir + "/straight"})), straight);
  REQUIRE(straight.records.size() == 6);

  const std::string save = f.dir + "/resumed";
  RunCapture first;
  run(f.options(with({"--save", save, "--exit-interval", "4"})), first);
  REQUIRE(first.records.size() == 4);
  std::filesystem::remove(ckpt::tracker_file_path(save));
  // A damaged newer iteration would be saved again by this run: the run stops before training.
  std::filesystem::create_directory(save + "/iter_0000006");
  RunCapture refused;
  const std::string message = error_of(f.options(with({"--save", save, "--load", save})), refused);
  CHECK_THAT(message, Contains("already holds iter_0000006"));
  CHECK(refused.records.empty());

  std::filesystem::remove(save + "/iter_0000006");
  const auto saved_4 = file_bytes(save + "/iter_0000004/mp_rank_00.h5");
  RunCapture second;
  run(f.options(with({"--save", save, "--load", save})), second);
  REQUIRE(second.records.size() == 2);
  CHECK(second.records.front().iteration == 5);
  std::vector<double> resumed = losses_of(first);
  for (double l : losses_of(second)) resumed.push_back(l);
  CHECK(resumed == losses_of(straight));
  CHECK(file_bytes(save + "/iter_0000004/mp_rank_00.h5") == saved_4);
  CHECK(ckpt::latest_iteration(save) == 6);
}

TEST_CASE("trainer: a tracker left behind by a killed save resumes from the newer iteration and moves on",
          "[trainer]") {
  TrainerFixture f("trainer_tracker_behind");
  const std::vector<std::string> common = {"--train-iters", "6", "--save-interval", "2", "--eval-iters", "0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  RunCapture straight;
  run(f.options(with({"--save", f.dir + "/straight"})), straight);
  REQUIRE(straight.records.size() == 6);

  const std::string save = f.dir + "/resumed";
  RunCapture first;
  run(f.options(with({"--save", save, "--exit-interval", "4"})), first);
  REQUIRE(first.records.size() == 4);
  // What a SIGKILL between the rename of iter_0000004 and the tracker's rewrite leaves
  // (tests/ckpt/test_checkpoint_crash.cpp kills a save there): the tracker of the save of
  // iteration 2, as old as that save.
  ckpt::write_tracker_file(save, 2);
  std::filesystem::last_write_time(ckpt::tracker_file_path(save),
                                   std::filesystem::last_write_time(save + "/iter_0000002"));
  const auto saved_4 = file_bytes(save + "/iter_0000004/mp_rank_00.h5");

  // Resuming from iteration 2 would save iteration 4 again, which is refused: the same command
  // would fail on every restart. It resumes from iteration 4 and its next save moves the tracker.
  RunCapture second;
  run(f.options(with({"--save", save, "--load", save})), second);
  REQUIRE(second.records.size() == 2);
  CHECK(second.records.front().iteration == 5);
  std::vector<double> resumed = losses_of(first);
  for (double l : losses_of(second)) resumed.push_back(l);
  CHECK(resumed == losses_of(straight));
  CHECK(file_bytes(save + "/iter_0000004/mp_rank_00.h5") == saved_4);
  CHECK(ckpt::latest_iteration(save) == 6);
}

TEST_CASE("trainer: no complete iteration and no tracker file stops with a message", "[trainer]") {
  TrainerFixture f("trainer_none_complete");
  const std::string save = f.dir + "/ckpt";
  RunCapture first;
  run(f.options({"--train-iters", "2", "--save", save, "--save-interval", "2", "--eval-iters", "0"}), first);
  std::filesystem::remove(ckpt::tracker_file_path(save));
  std::filesystem::resize_file(save + "/iter_0000002/mp_rank_00.h5", 1000);
  RunCapture c;
  const std::string message =
      error_of(f.options({"--train-iters", "4", "--load", save, "--save", save, "--save-interval", "2"}), c);
  CHECK_THAT(message, Contains(save + " has no latest_checkpointed_iteration.txt and none of its 1 iteration "
                                      "directories is a complete checkpoint; " +
                                      save + "/iter_0000002 is not complete: "));
  CHECK(c.records.empty());
}

TEST_CASE("trainer: a run from scratch does not write over committed iterations", "[trainer]") {
  TrainerFixture f("trainer_no_overwrite");
  const std::string save = f.dir + "/ckpt";
  RunCapture first;
  run(f.options({"--train-iters", "4", "--save", save, "--save-interval", "2", "--eval-iters", "0"}), first);
  const auto before = file_bytes(save + "/iter_0000004/mp_rank_00.h5");
  RunCapture again;
  const std::string message =
      error_of(f.options({"--train-iters", "4", "--save", save, "--save-interval", "2", "--eval-iters", "0"}), again);
  CHECK_THAT(message, Contains("--save " + save + " already holds iter_0000002") &&
                          Contains("never replaced") && Contains("--load " + save));
  CHECK(again.records.empty());
  CHECK(file_bytes(save + "/iter_0000004/mp_rank_00.h5") == before);
  // Iterations it would not reach are no obstacle: --exit-interval 1 saves only iteration 1.
  std::filesystem::remove_all(save + "/iter_0000002");
  std::filesystem::remove(ckpt::tracker_file_path(save));
  RunCapture short_run;
  run(f.options({"--train-iters", "4", "--save", save, "--save-interval", "2", "--exit-interval", "1",
                 "--eval-iters", "0"}),
      short_run);
  CHECK(ckpt::latest_iteration(save) == 1);
}

TEST_CASE("trainer: the fp32 weights are the master copy, older checkpoints with one still resume", "[trainer]") {
  TrainerFixture f("trainer_master_copy");
  const std::vector<std::string> common = {"--train-iters", "4", "--save-interval", "2", "--eval-iters", "0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  RunCapture straight;
  run(f.options(with({"--save", f.dir + "/straight"})), straight);

  const std::string save = f.dir + "/new";
  RunCapture first;
  run(f.options(with({"--save", save, "--exit-interval", "2"})), first);
  const std::string shard = save + "/iter_0000002/mp_rank_00.h5";
  ckpt::CheckpointMetadata legacy_meta;
  std::vector<std::pair<ckpt::TensorRecord, std::vector<std::byte>>> tensors;
  {
    const ckpt::ShardReader reader(shard);
    CHECK(reader.tensor_names("optimizer/fp32_master_params").empty());
    CHECK(reader.tensor_names("optimizer/exp_avg").size() == reader.tensor_names("model").size());
    CHECK_THAT(reader.metadata().extra_json.at("optimizer"), Contains("\"fp32_master_params\": \"model\""));
    legacy_meta = reader.metadata();
    for (const auto& r : reader.tensors()) tensors.emplace_back(r, reader.read_bytes(r.name));
  }

  // The same state as an older mgt wrote it: a separate master copy, no key saying otherwise.
  const std::string old_save = f.dir + "/old";
  std::filesystem::create_directories(old_save + "/iter_0000002");
  auto& scalars = legacy_meta.extra_json.at("optimizer");
  scalars = scalars.substr(0, scalars.find(", \"fp32_master_params\"")) + "}";
  {
    ckpt::ShardWriter writer(old_save + "/iter_0000002/mp_rank_00.h5", legacy_meta);
    for (const auto& [record, bytes] : tensors) writer.write(record, bytes);
    for (const auto& [record, bytes] : tensors) {
      if (!record.name.starts_with("model/")) continue;
      ckpt::TensorRecord master = record;
      master.name = ckpt::optimizer_tensor_path(ckpt::OptimizerState::MasterParam, record.name.substr(6));
      writer.write(master, bytes);
    }
    writer.close();
  }
  ckpt::write_tracker_file(old_save, 2);

  for (const std::string& dir : {save, old_save}) {
    INFO("resuming " << dir);
    RunCapture second;
    run(f.options(with({"--save", dir, "--load", dir})), second);
    std::vector<double> resumed = losses_of(first);
    for (double l : losses_of(second)) resumed.push_back(l);
    CHECK(resumed == losses_of(straight));
  }
}

TEST_CASE("trainer: the Hugging Face architecture an imported model came from is kept in its saves", "[trainer]") {
  TrainerFixture f("trainer_hf_architecture");
  const std::string first_save = f.dir + "/first";
  RunCapture first;
  run(f.options({"--train-iters", "4", "--exit-interval", "2", "--save-interval", "2", "--eval-iters", "0", "--save",
                 first_save}),
      first);

  // The same checkpoint as mgt-ckpt-convert would have written it from a Mistral directory.
  const std::string record = R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": null})";
  const std::string imported = f.dir + "/imported";
  std::filesystem::create_directories(imported + "/iter_0000002");
  {
    const ckpt::ShardReader reader(first_save + "/iter_0000002/mp_rank_00.h5");
    ckpt::CheckpointMetadata meta = reader.metadata();
    meta.extra_json["hf_architecture"] = record;
    ckpt::ShardWriter writer(imported + "/iter_0000002/mp_rank_00.h5", meta);
    for (const auto& r : reader.tensors()) writer.write(r, reader.read_bytes(r.name));
    writer.close();
  }
  ckpt::write_tracker_file(imported, 2);

  for (const bool finetune : {false, true}) {
    INFO("--finetune " << finetune);
    const std::string save = f.dir + (finetune ? "/finetuned" : "/resumed");
    std::vector<std::string> flags = {"--train-iters", "4", "--save-interval", "4", "--eval-iters", "0",
                                      "--load", imported, "--save", save};
    if (finetune) flags.push_back("--finetune");
    RunCapture c;
    run(f.options(flags), c);
    const auto directory = ckpt::find_latest_checkpoint_directory(save);
    REQUIRE(directory);
    const ckpt::ShardReader saved(*directory + "/mp_rank_00.h5");
    CHECK(saved.metadata().extra_json.at("hf_architecture") == record);
  }
  // A model that was not imported has none.
  CHECK_FALSE(ckpt::ShardReader(first_save + "/iter_0000002/mp_rank_00.h5").metadata().extra_json.count("hf_architecture"));
}
