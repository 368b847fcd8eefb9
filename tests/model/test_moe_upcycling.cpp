// Upcycling a dense MLP into experts (model/moe_upcycling.hpp) against a reference written from
// Megatron-Core's upcycling_utils.py (tools/reference/moe_upcycling_reference.py, plain Python)
// on random weights: every expert's fc1 and fc2 and the router, bit for bit, with SwiGLU and
// GeLU, granularities 1, 2 and 4, with and without --moe-router-pre-softmax.
#include <catch2/catch.hpp>

#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/moe_upcycling.hpp"
#include "json_list_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using mgt::test::json_list;

namespace {

struct UpcyclingCase {
  const char* name;
  std::int64_t hidden, dense_ffn, expert_ffn, experts, topk;
  bool pre_softmax, gated;
};

std::vector<float> floats(simdjson::dom::element e) {
  std::vector<float> v;
  for (double x : e.get_array()) v.push_back(static_cast<float>(x));
  return v;
}

std::vector<float> random_floats(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

void check_case(const UpcyclingCase& c, std::uint32_t seed) {
  INFO(c.name);
  std::mt19937 rng(seed);
  const std::int64_t chunks = c.gated ? 2 : 1;
  const std::vector<float> fc1 = random_floats(chunks * c.dense_ffn * c.hidden, rng);
  const std::vector<float> fc2 = random_floats(c.hidden * c.dense_ffn, rng);
  const std::vector<float> router = random_floats(c.experts * c.hidden, rng);

  std::string name = "moe_upcycling_";
  name += c.name;
  const std::string dir = test::scratch_dir(name);
  {
    std::ofstream in(dir + "/in.json");
    const auto flag = [](bool b) { return b ? "true" : "false"; };
    in << "{\"hidden\":" << c.hidden << ",\"dense_ffn\":" << c.dense_ffn << ",\"expert_ffn\":" << c.expert_ffn
       << ",\"experts\":" << c.experts << ",\"topk\":" << c.topk << ",\"pre_softmax\":" << flag(c.pre_softmax)
       << ",\"gated\":" << flag(c.gated) << ",\"fc1\":" << json_list(fc1) << ",\"fc2\":" << json_list(fc2)
       << ",\"router\":" << json_list(router) << "}";
  }
  std::ostringstream command;
  command << "python3 " << MGT_SOURCE_DIR << "/tools/reference/moe_upcycling_reference.py " << dir << "/in.json " << dir
          << "/out.json";
  REQUIRE(std::system(command.str().c_str()) == 0);
  simdjson::dom::parser parser;
  const simdjson::padded_string text = simdjson::padded_string::load(dir + "/out.json");
  const simdjson::dom::element want = parser.parse(text);

  const UpcyclingPlan plan =
      plan_upcycling(c.dense_ffn, c.expert_ffn, c.experts, c.topk, c.pre_softmax, c.gated);
  CHECK(plan.granularity == int64_t(want["granularity"]));
  CHECK(plan.expansion_rate == int64_t(want["expansion_rate"]));
  CHECK(plan.weight_scale == static_cast<float>(double(want["scale"])));
  const simdjson::dom::array want_fc1 = want["fc1"];
  const simdjson::dom::array want_fc2 = want["fc2"];
  REQUIRE(static_cast<std::int64_t>(want_fc1.size()) == c.experts);
  for (std::int64_t e = 0; e < c.experts; ++e) {
    INFO("expert " << e);
    CHECK(upcycled_fc1(fc1, c.hidden, c.dense_ffn, c.gated, e, plan) == floats(want_fc1.at(e)));
    CHECK(upcycled_fc2(fc2, c.hidden, c.dense_ffn, e, plan) == floats(want_fc2.at(e)));
  }
  CHECK(upcycled_router(router, c.experts, c.hidden, plan.granularity) == floats(want["router"]));
}

}  // namespace

TEST_CASE("moe upcycling against Megatron's code (Python reference)", "[model][moe]") {
  const UpcyclingCase cases[] = {
      // Mixtral-like: SwiGLU, each expert a whole copy, the softmax after the top-2 choice: scale 1.
      {"swiglu_copies", 8, 24, 24, 4, 2, false, true},
      // SwiGLU cut in two (fine-grained), scale 2^(1/3).
      {"swiglu_granularity_2", 8, 24, 12, 4, 2, false, true},
      // GeLU, whole copies, softmax before the choice: scale (4 · 1 · 1 / 2)^(1/2).
      {"gelu_pre_softmax", 6, 16, 16, 4, 2, true, false},
      // SwiGLU in four slices, 8 experts, pre-softmax top-2: scale (2 · 16 / 2)^(1/3).
      {"swiglu_granularity_4_pre_softmax", 4, 24, 6, 8, 2, true, true},
  };
  std::uint32_t seed = 40;
  for (const UpcyclingCase& c : cases) check_case(c, seed++);
}

TEST_CASE("moe upcycling: whole copies keep the dense weights, and slices that do not fit are refused",
          "[model][moe]") {
  std::mt19937 rng(7);
  const std::vector<float> fc1 = random_floats(2 * 12 * 4, rng);
  const std::vector<float> fc2 = random_floats(4 * 12, rng);
  const UpcyclingPlan copies = plan_upcycling(12, 12, 8, 2, false, true);
  CHECK(copies.granularity == 1);
  CHECK(copies.expansion_rate == 8);
  CHECK(copies.weight_scale == 1.0f);
  for (std::int64_t e = 0; e < 8; ++e) {
    CHECK(upcycled_fc1(fc1, 4, 12, true, e, copies) == fc1);
    CHECK(upcycled_fc2(fc2, 4, 12, e, copies) == fc2);
  }
  // Expert 3 of granularity 2 takes the second half of every row of fc2 and of each SwiGLU half.
  const UpcyclingPlan halves = plan_upcycling(12, 6, 8, 2, false, true);
  const float s = halves.weight_scale;
  CHECK(s == Approx(std::cbrt(2.0)).epsilon(1e-7));
  const std::vector<float> e3 = upcycled_fc2(fc2, 4, 12, 3, halves);
  CHECK(e3[0] == fc2[6] * s);
  CHECK(e3[6 + 5] == fc2[12 + 11] * s);
  const std::vector<float> f3 = upcycled_fc1(fc1, 4, 12, true, 3, halves);
  CHECK(f3[0] == fc1[6 * 4] * s);             // gate row 6
  CHECK(f3[6 * 4] == fc1[(12 + 6) * 4] * s);  // linear half's row 6

  CHECK_THROWS_WITH(plan_upcycling(12, 5, 8, 2, false, true), Catch::Contains("must be divisible by the experts' (5)"));
  CHECK_THROWS_WITH(plan_upcycling(12, 4, 8, 2, false, true),
                    Catch::Contains("--num-experts (8) must be divisible by the granularity"));
}
