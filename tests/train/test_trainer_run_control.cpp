// The trainer with Megatron's flags that choose which steps run and which checkpoint is read:
// --iterations-to-skip, --skip-train, --ckpt-step and --log-progress.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "ckpt/model_checkpoint.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_model.hpp"
#include "train/gpt_config_from_options.hpp"
#include "ckpt/checkpoint_args_flags.hpp"
#include "train/train_flags.hpp"
#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

TEST_CASE("trainer: --iterations-to-skip drops those steps' batches and keeps the schedule where it was",
          "[trainer]") {
  TrainerFixture f("trainer_iterations_to_skip");
  RunCapture plain;
  run(f.options({"--train-iters", "6"}), plain);
  // Megatron's count: 1 and 3 completed iterations, so the iterations logged as 2 and 4.
  const std::vector<std::string> skipping = {"--train-iters", "6", "--iterations-to-skip", "1", "3",
                                             "--save", f.dir + "/ckpt", "--save-interval", "5"};
  RunCapture skipped;
  run(f.options(skipping), skipped);
  REQUIRE(skipped.records.size() == 4);
  const std::int64_t expected_iterations[] = {1, 3, 5, 6};
  for (std::size_t i = 0; i < 4; ++i) CHECK(skipped.records[i].iteration == expected_iterations[i]);
  CHECK(skipped.result.iteration == 6);
  // The first step is the plain run's; the scheduler did not step for the skipped ones, so the
  // k-th step taken has the plain run's k-th rate.
  CHECK(skipped.records[0].loss == plain.records[0].loss);
  for (std::size_t i = 0; i < 4; ++i) CHECK(skipped.records[i].learning_rate == plain.records[i].learning_rate);
  // Iteration 3 read the batch after the one iteration 2 dropped: not the plain run's second.
  CHECK(skipped.records[1].loss != plain.records[1].loss);
  const auto lines = lines_containing(skipped.out.str(), "] iteration ");
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].find("skipped samples") == std::string::npos);
  CHECK(lines[1].find("| consumed samples:           12 | skipped samples:            4 |") != std::string::npos);
  CHECK(lines[3].find("| consumed samples:           24 | skipped samples:            8 |") != std::string::npos);

  // The skipped samples are part of the checkpoint (of iteration 5) and of the resumed log.
  RunCapture resumed;
  run(f.options({"--train-iters", "6", "--load", f.dir + "/ckpt", "--ckpt-step", "5"}), resumed);
  REQUIRE(resumed.records.size() == 1);
  CHECK(resumed.records[0].loss == skipped.records[3].loss);
  CHECK(lines_containing(resumed.out.str(), "| consumed samples:           24 | skipped samples:            8 |").size() ==
        1);
}

TEST_CASE("trainer: --skip-train evaluates the loaded model from the first validation sample and saves nothing",
          "[trainer]") {
  TrainerFixture f("trainer_skip_train");
  const std::string save = f.dir + "/ckpt";
  RunCapture trained;
  run(f.options({"--train-iters", "4", "--save", save, "--save-interval", "4"}), trained);
  const auto validation = lines_containing(trained.out.str(), " on validation set ");
  const auto test = lines_containing(trained.out.str(), " on test set ");
  REQUIRE(validation.size() == 1);
  REQUIRE(test.size() == 1);

  RunCapture evaluated;
  // (A longer run's validation split is as long: (train-iters / eval-interval + 1) · eval-iters
  // batches, 1 · 2 either way.)
  run(f.options({"--train-iters", "8", "--load", save, "--save", save, "--save-interval", "1", "--skip-train",
                 "--use-checkpoint-opt_param-scheduler"}),
      evaluated);
  CHECK(evaluated.records.empty());
  CHECK(evaluated.result.iteration == 4);
  const std::string out = evaluated.out.str();
  CHECK(out.find("skipping training (--skip-train is on) ...") != std::string::npos);
  CHECK(out.find("training ...\n") == std::string::npos);
  // The training run evaluated once, at its end, from the first validation sample: so does this.
  CHECK(lines_containing(out, " on validation set ") == validation);
  CHECK(lines_containing(out, " on test set ") == test);
  CHECK(!std::filesystem::exists(save + "/iter_0000005"));
  CHECK(*ckpt::latest_iteration(save) == 4);
}

TEST_CASE("trainer: --ckpt-step loads that iteration, not the tracker's", "[trainer]") {
  TrainerFixture f("trainer_ckpt_step");
  const std::string save = f.dir + "/ckpt";
  RunCapture first;
  run(f.options({"--train-iters", "4", "--save", save, "--save-interval", "2"}), first);
  REQUIRE(*ckpt::latest_iteration(save) == 4);

  // From iteration 2 of the same directory: iterations 3 and 4 as the first run had them.
  RunCapture again;
  run(f.options({"--train-iters", "4", "--load", save, "--ckpt-step", "2"}), again);
  REQUIRE(again.records.size() == 2);
  CHECK(again.records[0].loss == first.records[2].loss);
  CHECK(again.records[1].loss == first.records[3].loss);
  CHECK(again.out.str().find("successfully loaded checkpoint from " + save + " [ t 1/1, p 1/1 ] at iteration 2") !=
        std::string::npos);

  // 0 is Megatron's "not given": the tracker's checkpoint.
  RunCapture latest;
  run(f.options({"--train-iters", "4", "--load", save, "--ckpt-step", "0"}), latest);
  CHECK(latest.records.empty());

  RunCapture missing;
  try {
    run(f.options({"--train-iters", "4", "--load", save, "--ckpt-step", "3"}), missing);
    FAIL("a missing --ckpt-step iteration was loaded");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--ckpt-step 3: " + save + " holds no checkpoint of iteration 3 (its "
                                     "iterations: 2, 4)") != std::string::npos);
  }
}

TEST_CASE("trainer: --log-progress appends Megatron's lines to SAVE/progress.txt across jobs", "[trainer]") {
  TrainerFixture f("trainer_log_progress");
  const std::string save = f.dir + "/ckpt";
  RunCapture first;
  run(f.options({"--train-iters", "4", "--save", save, "--save-interval", "2", "--log-progress"}), first);
  RunCapture second;
  run(f.options({"--train-iters", "6", "--use-checkpoint-opt_param-scheduler", "--load", save, "--save", save, "--save-interval", "2",
                 "--log-progress", "--async-save"}),
      second);
  std::istringstream text(read_input_file(save + "/progress.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  const std::string head = R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\tJob ID: [^\t]*\t# GPUs: 1\t)";
  const std::string saved = R"(\tJob throughput: \d+\.\d TFLOP/s/GPU\tCumulative throughput: \d+\.\d TFLOP/s/GPU\t)"
                            R"(Floating-point operations: \d\.\d\de\+\d\d\tTokens \(in billions\): 0\.00$)";
  const std::vector<std::string> expected = {
      head + "Starting job$",
      head + "Saved checkpoint\tIteration: 2" + saved,
      head + "Saved checkpoint\tIteration: 4" + saved,
      head + "Starting job$",
      head + "Saving async checkpoint\tIteration: 6" + saved,
      head + "Saved async checkpoint\tIteration: 6$",
  };
  REQUIRE(lines.size() == expected.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO(lines[i]);
    CHECK(std::regex_search(lines[i], std::regex(expected[i])));
  }
  // Without --save there is nowhere to write: nothing happens.
  RunCapture unsaved;
  run(f.options({"--train-iters", "1", "--log-progress"}), unsaved);
  CHECK(unsaved.records.size() == 1);
}

TEST_CASE("trainer: --use-checkpoint-args takes the model's flags from the checkpoint, as Megatron", "[trainer]") {
  TrainerFixture f("trainer_use_checkpoint_args");
  const std::string save = f.dir + "/ckpt";
  const std::vector<std::string> llama = {"--swiglu", "--normalization", "RMSNorm", "--position-embedding-type",
                                          "rope", "--disable-bias-linear", "--group-query-attention",
                                          "--num-query-groups", "2", "--untie-embeddings-and-output-weights",
                                          "--attention-dropout", "0.0"};
  std::vector<std::string> saving = llama;
  saving.insert(saving.end(), {"--train-iters", "4", "--save", save, "--save-interval", "2"});
  RunCapture whole;
  run(f.options(saving), whole);

  // The fixture's flags without the model's sizes, resumed from iteration 2 with contradicting
  // kinds: the checkpoint's replace them (Megatron forces those), the sizes come from it.
  std::vector<std::string> flags = f.flags({"--train-iters", "4", "--use-checkpoint-args", "--load", save,
                                            "--ckpt-step", "2", "--normalization", "LayerNorm",
                                            "--attention-dropout", "0.1"});
  for (const char* size : {"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length",
                           "--max-position-embeddings"}) {
    const auto at = std::find(flags.begin(), flags.end(), size);
    REQUIRE(at != flags.end());
    flags.erase(at, at + 2);
  }
  std::vector<const char*> argv = {"mgt-train"};
  for (const std::string& s : flags) argv.push_back(s.c_str());
  const TrainOptions options = parse_train_options(static_cast<int>(argv.size()), argv.data());
  CHECK(*options.model.num_layers == 2);
  CHECK(options.model.normalization == "RMSNorm");
  RunCapture resumed;
  run(options, resumed);
  REQUIRE(resumed.records.size() == 2);
  CHECK(resumed.records[0].loss == whole.records[2].loss);
  CHECK(resumed.records[1].loss == whole.records[3].loss);

  // A checkpoint whose arguments record the RoPE base as a float (mgt-ckpt-convert's import of a
  // Hugging Face rope_theta of 10000.0) gives --rotary-base, an integer flag, its integer.
  const std::string imported = f.dir + "/imported";
  {
    const auto backend = make_backend("cpu");
    const GptConfig config = gpt_config_from_options(options, 64);
    GptModel model(config, *backend, 1);
    const std::string args = model_args_json(config);
    REQUIRE(args.find("\"rotary_base\": 10000.0") != std::string::npos);
    save_model_checkpoint(imported, 1, model.parameters(), args);
  }
  TrainOptions table_defaults;
  const CheckpointArgsCommandLine from_import = command_line_with_checkpoint_args(
      {"--use-checkpoint-args", "--load", imported}, train_flags(table_defaults));
  CHECK(std::find(from_import.args.begin(), from_import.args.end(), "--rotary-base=10000") != from_import.args.end());
  CHECK(std::find(from_import.lines.begin(), from_import.lines.end(),
                  "Setting rotary_base to 10000.0 from checkpoint") != from_import.lines.end());

  // --use-mp-args-from-checkpoint-args: the one-rank checkpoint's layout replaces the command
  // line's; without it the command line's stays.
  const std::vector<std::string> layout = {"--use-checkpoint-args", "--load", save, "--tensor-model-parallel-size",
                                           "2", "--pipeline-model-parallel-size", "2"};
  std::vector<std::string> with_mp = layout;
  with_mp.push_back("--use-mp-args-from-checkpoint-args");
  const CheckpointArgsCommandLine taken = command_line_with_checkpoint_args(with_mp, train_flags(table_defaults));
  for (const char* line : {"Setting tensor_model_parallel_size to 1 from checkpoint",
                           "Setting pipeline_model_parallel_size to 1 from checkpoint",
                           "Setting expert_model_parallel_size to 1 from checkpoint"})
    CHECK(std::find(taken.lines.begin(), taken.lines.end(), line) != taken.lines.end());
  CHECK(std::find(taken.args.begin(), taken.args.end(), "2") == taken.args.end());
  const CheckpointArgsCommandLine kept = command_line_with_checkpoint_args(layout, train_flags(table_defaults));
  CHECK(std::count(kept.args.begin(), kept.args.end(), "2") == 2);

  // Megatron's own checks and notes.
  const char* no_load[] = {"mgt-train", "--use-checkpoint-args"};
  CHECK_THROWS_WITH(read_train_options(2, no_load), "--use-checkpoint-args requires --load argument");
  std::filesystem::create_directories(f.dir + "/empty");
  const std::vector<std::string> bare = {"--use-checkpoint-args", "--load", f.dir + "/empty", "--num-layers", "2"};
  TrainOptions defaults;
  const CheckpointArgsCommandLine unchanged = command_line_with_checkpoint_args(bare, train_flags(defaults));
  CHECK(unchanged.args == bare);
  CHECK(unchanged.lines ==
        std::vector<std::string>{"Checkpoint not found to provide arguments, using provided arguments."});
}
