// Megatron's --deterministic-mode on the GPU: two runs of the same command give identical losses,
// and a run stopped halfway and resumed from its checkpoint gives the uninterrupted run's losses
// and weights bit for bit, in fp32 and in bf16 (cuDNN attention where it applies).
#include <catch2/catch.hpp>

#include "../train/trainer_testing.hpp"
#include "backend_pair.hpp"

using namespace mgt;
using namespace mgt::trainer_test;
using namespace mgt::cuda_testing;

TEST_CASE("cuda training: --deterministic-mode reruns and resumes bit for bit", "[cuda]") {
  if (skip_without_gpu()) return;
  for (const bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16" : "fp32"));
    TrainerFixture f(bf16 ? "cuda_determinism_bf16" : "cuda_determinism_fp32");
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> flags = {"--device", "cuda", "--deterministic-mode", "--train-iters", "8",
                                        "--save-interval", "100"};
      if (bf16) flags.push_back("--bf16");
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
