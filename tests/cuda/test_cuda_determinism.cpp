// Megatron's --deterministic-mode on the GPU: two runs of the same command give identical losses,
// and a run stopped halfway and resumed from its checkpoint gives the uninterrupted run's losses
// and weights bit for bit, in fp32, bf16 and fp16 (cuDNN attention where it applies; fp16 with
// its dynamic loss scale, which a resumed run takes from the checkpoint).
#include <catch2/catch.hpp>

#include "../train/trainer_testing.hpp"
#include "backend_pair.hpp"

using namespace mgt;
using namespace mgt::trainer_test;
using namespace mgt::cuda_testing;

TEST_CASE("cuda training: --deterministic-mode reruns and resumes bit for bit", "[cuda]") {
  if (skip_without_gpu()) return;
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    INFO(precision);
    TrainerFixture f("cuda_determinism_" + precision);
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> flags = {"--device", "cuda", "--deterministic-mode", "--train-iters", "8",
                                        "--save-interval", "100"};
      if (precision != "fp32") flags.push_back("--" + precision);
      // A scale that grows every other good step, so that the resumed run needs the saved state.
      if (precision == "fp16") {
        for (const char* flag : {"--initial-loss-scale", "1024", "--loss-scale-window", "2"}) flags.push_back(flag);
      }
      flags.insert(flags.end(), extra.begin(), extra.end());
      return flags;
    };

    RunCapture straight;
    run(f.options(with({"--save", f.dir + "/straight"})), straight);
    REQUIRE(straight.records.size() == 8);
    CHECK(lines_containing(straight.out.str(), "deterministic kernels only").size() == 1);
    RunCapture again;
    run(f.options(with({"--save", f.dir + "/again"})), again);
    CHECK(losses_of(again) == losses_of(straight));

    RunCapture first_half;
    run(f.options(with({"--save", f.dir + "/resumed", "--exit-interval", "4"})), first_half);
    REQUIRE(first_half.records.size() == 4);
    RunCapture second_half;
    run(f.options(with({"--save", f.dir + "/resumed", "--load", f.dir + "/resumed"})), second_half);
    REQUIRE(second_half.records.size() == 4);
    std::vector<double> resumed = losses_of(first_half);
    for (double l : losses_of(second_half)) resumed.push_back(l);
    CHECK(resumed == losses_of(straight));
    CHECK(second_half.records.back().loss_scale == straight.records.back().loss_scale);

    for (const char* other : {"/again", "/resumed"}) {
      const auto a = checkpoint_tensors(f.dir + "/straight");
      const auto b = checkpoint_tensors(f.dir + other);
      REQUIRE(a.size() == b.size());
      REQUIRE_FALSE(a.empty());
      for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(other << ": " << a[i].first);
        CHECK(a[i].first == b[i].first);
        CHECK(a[i].second == b[i].second);
      }
    }
  }
}

TEST_CASE("cuda training: --fp16 tracks the fp32 run and backs off from an overflowing scale", "[cuda]") {
  if (skip_without_gpu()) return;
  TrainerFixture f("cuda_fp16");
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--device", "cuda", "--train-iters", "10"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  };
  RunCapture fp32;
  run(f.options(with({})), fp32);
  // A scale that never overflows: every iteration trains, on fp16 weights and activations, and
  // fp16's 11 significant bits keep the losses within a few parts in a thousand of fp32's.
  RunCapture fp16;
  run(f.options(with({"--fp16", "--loss-scale", "1024"})), fp16);
  CHECK(lines_containing(fp16.out.str(), "fp16 weights and activations").size() == 1);
  const std::vector<double> want = losses_of(fp32);
  const std::vector<double> got = losses_of(fp16);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("iteration " << i + 1);
    CHECK_FALSE(fp16.records[i].skipped);
    CHECK(got[i] == Approx(want[i]).epsilon(1e-2));
  }

  // 2^32, Megatron's default: the scaled loss gradient overflows fp16 until the scale has dropped,
  // and then the run trains.
  RunCapture dynamic;
  run(f.options(with({"--fp16", "--train-iters", "40"})), dynamic);
  REQUIRE(dynamic.records.size() == 40);
  int64_t skipped = 0;
  for (const IterationRecord& r : dynamic.records) skipped += r.skipped ? 1 : 0;
  INFO(skipped << " iterations skipped; the scale ended at " << dynamic.records.back().loss_scale);
  CHECK(skipped > 0);
  CHECK(skipped < 35);
  CHECK(dynamic.records.back().loss_scale < 4294967296.0);
  CHECK_FALSE(dynamic.records.back().skipped);
  CHECK(dynamic.records.back().loss < dynamic.records.front().loss);
}
