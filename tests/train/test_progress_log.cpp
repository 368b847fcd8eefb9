// --log-progress's lines and throughputs (train/progress_log.hpp) against Megatron's format.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "test_paths.hpp"
#include "train/progress_log.hpp"

using namespace mgt;

TEST_CASE("progress log: Megatron's line and after-save fields", "[progress_log]") {
  CHECK(progress_log_line("2026-11-30 14:02:11", "4711", 8, "Starting job") ==
        "2026-11-30 14:02:11\tJob ID: 4711\t# GPUs: 8\tStarting job\n");
  ProgressAfterSave p;
  p.iteration = 500;
  p.job_tflops_per_gpu = 391.24;
  p.cumulative_tflops_per_gpu = 388.05;
  p.floating_point_operations_so_far = 3.2149e18;
  p.tokens_so_far = 2.049e9;
  CHECK(progress_after_save_event(p) ==
        "Saved checkpoint\tIteration: 500\tJob throughput: 391.2 TFLOP/s/GPU\tCumulative throughput: 388.1 "
        "TFLOP/s/GPU\tFloating-point operations: 3.21e+18\tTokens (in billions): 2.05");
  p.background = true;
  CHECK(progress_after_save_event(p).rfind("Saving async checkpoint\tIteration: 500\t", 0) == 0);
}

TEST_CASE("progress log: the cumulative count starts at the first job of the latest series of one world size",
          "[progress_log]") {
  const std::string text =
      "2026-11-01 10:00:00\tJob ID: 1\t# GPUs: 8\tStarting job\n"
      "2026-11-01 11:00:00\tJob ID: 1\t# GPUs: 8\tSaved checkpoint\tIteration: 10\tJob throughput: 1.0 TFLOP/s/GPU\t"
      "Cumulative throughput: 1.0 TFLOP/s/GPU\tFloating-point operations: 1.00e+18\tTokens (in billions): 0.10\n"
      "2026-11-01 12:00:00\tJob ID: 2\t# GPUs: 16\tStarting job\n"
      "2026-11-01 13:00:00\tJob ID: 2\t# GPUs: 16\tSaved checkpoint\tIteration: 20\tJob throughput: 1.0 TFLOP/s/GPU\t"
      "Cumulative throughput: 1.0 TFLOP/s/GPU\tFloating-point operations: 3.00e+18\tTokens (in billions): 0.20\n"
      "not a progress line\n"
      "2026-11-01 14:00:00\tJob ID: 3\t# GPUs: 8\tStarting job\n"
      "2026-11-01 15:00:00\tJob ID: 4\t# GPUs: 8\tStarting job\n";
  const auto eight = find_progress_log_start(text, 8);
  REQUIRE(eight);
  CHECK(eight->time_stamp == "2026-11-01 14:00:00");       // the series of 8 began again after the 16
  CHECK(eight->floating_point_operations == 3.00e18);     // from the last save before it
  const auto sixteen = find_progress_log_start(text, 16);
  CHECK(!sixteen);                                         // broken by the later jobs of 8
  CHECK(!find_progress_log_start("", 8));
}

TEST_CASE("progress log: the job's and the cumulative throughput", "[progress_log]") {
  const std::string dir = test::scratch_dir("progress_log");
  const auto t0 = ProgressLog::Clock::from_time_t(1'800'000'000);
  const auto later = [&](int seconds) { return t0 + std::chrono::seconds(seconds); };
  {
    ProgressLog first(dir, "4711", 2, t0);
    first.job_started(t0);
    // 2e15 FLOPs in 1,000 s on 2 GPUs: 1 TFLOP/s per GPU, the job's and the run's.
    first.checkpoint_saved(100, false, 2e15, 4096, later(1000));
  }
  {
    // A second job from the checkpoint at 2e15 FLOPs, started at 2,000 s: 4e15 more by 3,000 s.
    ProgressLog second(dir, "4712", 2, later(2000));
    second.job_started(later(2000));
    second.set_job_start_flops(2e15);
    second.checkpoint_saved(200, false, 6e15, 8192, later(3000));
  }
  std::ifstream in(dir + "/progress.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].find("\tJob ID: 4711\t# GPUs: 2\tStarting job") != std::string::npos);
  CHECK(lines[2].find("\tJob ID: 4712\t# GPUs: 2\tStarting job") != std::string::npos);
  CHECK(lines[1].find("\tSaved checkpoint\tIteration: 100\tJob throughput: 1.0 TFLOP/s/GPU\tCumulative throughput: 1.0 "
                      "TFLOP/s/GPU\tFloating-point operations: 2.00e+15\tTokens (in billions): 0.00") !=
        std::string::npos);
  // Job: 4e15 / (1,000 s · 2) = 2.0; cumulative: 6e15 / (3,000 s · 2) = 1.0.
  CHECK(lines[3].find("\tIteration: 200\tJob throughput: 2.0 TFLOP/s/GPU\tCumulative throughput: 1.0 TFLOP/s/GPU\t") !=
        std::string::npos);
}
