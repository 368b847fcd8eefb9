#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>

#include "trainer_testing.hpp"

using namespace mgt;
using namespace mgt::trainer_test;

TEST_CASE("trainer: the loss of a tiny model goes down", "[trainer]") {
  TrainerFixture f("trainer_learns");
  RunCapture c;
  run(f.options({"--train-iters", "60", "--lr", "1e-2", "--min-lr", "1e-3", "--hidden-dropout", "0",
                 "--attention-dropout", "0", "--log-interval", "20"}),
      c);
  REQUIRE(c.records.size() == 60);
  double last = 0.0;
  for (std::size_t i = 55; i < 60; ++i) last += c.records[i].loss / 5.0;
  INFO("first loss " << c.records[0].loss << ", mean of the last five " << last);
  CHECK(c.records[0].loss > 3.5);  // about ln 64 at initialisation
  CHECK(last < 0.5 * c.records[0].loss);
  for (const auto& r : c.records) CHECK_FALSE(r.skipped);
}

TEST_CASE("trainer: Megatron's iteration, validation and test lines", "[trainer]") {
  TrainerFixture f("trainer_log_lines");
  RunCapture c;
  run(f.options({"--train-iters", "4", "--log-interval", "2", "--eval-interval", "2", "--log-throughput"}), c);
  const std::string text = c.out.str();

  const auto iterations = lines_containing(text, "] iteration ");
  REQUIRE(iterations.size() == 2);
  const std::regex line(
      R"(^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration        2/       4 \| consumed samples:            8 \|)"
      R"( elapsed time per iteration \(ms\): \d+\.\d \| throughput per GPU \(TFLOP/s/GPU\): \d+\.\d+ \|)"
      R"( learning rate: \d\.\d{6}E[-+]\d\d \| global batch size:     4 \| lm loss: \d\.\d{6}E[-+]\d\d \|)"
      R"( loss scale: 1\.0 \| grad norm: \d+\.\d{3} \| number of skipped iterations:   0 \|)"
      R"( number of nan iterations:   0 \| tokens per second: \d+\.\d \|$)");
  CHECK(std::regex_match(iterations[0], line));
  CHECK(iterations[1].find("iteration        4/       4 | consumed samples:           16 |") != std::string::npos);

  CHECK(lines_containing(text, " validation loss at iteration 2 | lm loss value: ").size() == 1);
  CHECK(lines_containing(text, " validation loss at iteration 4 | lm loss value: ").size() == 1);
  CHECK(lines_containing(text, " validation loss at iteration 4 on validation set | ").size() == 1);
  const auto test = lines_containing(text, " validation loss at iteration 4 on test set | lm loss value: ");
  REQUIRE(test.size() == 1);
  CHECK(std::regex_search(test[0], std::regex(R"(lm loss PPL: \d\.\d{6}E\+\d\d \| $)")));
  // Each block is framed by dashes one longer than its line.
  const auto dashes = lines_containing(text, "-----");
  CHECK(dashes.size() == 8);
  CHECK(dashes[0].size() == lines_containing(text, " validation loss at iteration 2 |")[0].size() + 1);
  CHECK(lines_containing(text, "[after training is done] datetime: ").size() == 1);
  CHECK(lines_containing(text, " > padded vocab (size: 64) with 0 dummy tokens (new size: 64)").size() == 1);
}

TEST_CASE("trainer: metrics file holds one JSON object per log line and evaluation", "[trainer]") {
  TrainerFixture f("trainer_metrics");
  const std::string metrics = f.dir + "/metrics.jsonl";
  RunCapture c;
  run(f.options({"--train-iters", "4", "--log-interval", "2", "--eval-interval", "4", "--metrics-file", metrics}), c);
  std::ifstream in(metrics);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 5);  // 2 train, validation at 4, final validation, test
  for (const auto& l : lines) {
    CHECK(l.front() == '{');
    CHECK(l.back() == '}');
  }
  for (const char* key : {"\"event\": \"train\"", "\"iteration\": 2", "\"consumed_samples\": 8", "\"lm_loss\": ",
                          "\"tokens_per_second\": ", "\"learning_rate\": ", "\"grad_norm\": ",
                          "\"elapsed_ms_per_iteration\": ", "\"skipped_iterations\": 0", "\"nan_iterations\": 0",
                          "\"timestamp\": "}) {
    INFO(key);
    CHECK(lines[0].find(key) != std::string::npos);
  }
  CHECK(lines[1].find("\"iteration\": 4") != std::string::npos);
  CHECK(lines[2].find("\"event\": \"validation\"") != std::string::npos);
  CHECK(lines[2].find("\"lm_loss_ppl\": ") != std::string::npos);
  CHECK(lines[3].find("\"event\": \"validation\"") != std::string::npos);
  CHECK(lines[4].find("\"event\": \"test\"") != std::string::npos);

  // A resumed run appends.
  RunCapture more;
  run(f.options({"--train-iters", "4", "--log-interval", "2", "--eval-iters", "0", "--metrics-file", metrics}), more);
  std::ifstream again(metrics);
  std::size_t count = 0;
  for (std::string l; std::getline(again, l);) ++count;
  CHECK(count == 7);
}

TEST_CASE("trainer: --mock-data trains on Megatron's synthetic sequences", "[trainer]") {
  TrainerFixture f("trainer_mock_data");
  std::vector<std::string> flags = f.flags({"--train-iters", "2", "--eval-interval", "2", "--eval-iters", "1"});
  // Mock data replaces the dataset flags.
  for (const char* flag : {"--data-path", "--split", "--data-cache-path"}) {
    auto at = std::find(flags.begin(), flags.end(), flag);
    REQUIRE(at != flags.end());
    flags.erase(at, at + 2);
  }
  flags.push_back("--mock-data");
  std::vector<const char*> argv = {"mgt-train"};
  for (const auto& s : flags) argv.push_back(s.c_str());
  RunCapture c;
  run(parse_train_options(static_cast<int>(argv.size()), argv.data()), c);
  REQUIRE(c.records.size() == 2);
  for (const auto& r : c.records) CHECK(std::isfinite(r.loss));
  CHECK(lines_containing(c.out.str(), " validation loss at iteration 2 on test set | ").size() == 1);
}
