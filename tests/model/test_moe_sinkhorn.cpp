// Sinkhorn routing (--moe-router-load-balancing-type sinkhorn) on the CPU backend against a
// reference written from Megatron-Core's code (tools/reference/moe_sinkhorn_reference.py, plain
// Python in float64) on random logits: the Sinkhorn balancing (Backend::moe_sinkhorn), the experts
// chosen by it in training and by the gates in evaluation, and the gates (the sigmoid for top-1,
// the softmax over all experts otherwise).
#include <catch2/catch.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"
#include "json_list_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using mgt::test::json_list;

namespace {

std::vector<float> floats(simdjson::dom::element e) {
  std::vector<float> v;
  for (double x : e.get_array()) v.push_back(static_cast<float>(x));
  return v;
}

// max |got − want| / max |want|.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double scale = 0.0, diff = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return diff / scale;
}

void check_sinkhorn_routing(int64_t tokens, int64_t experts, int64_t topk, std::uint32_t seed) {
  INFO(tokens << " tokens, " << experts << " experts, top-" << topk);
  const int64_t n = tokens * experts;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(static_cast<std::size_t>(n));
  for (float& x : logits) x = normal(rng);

  std::string name = "moe_sinkhorn_";
  name += std::to_string(seed);
  const std::string dir = test::scratch_dir(name);
  std::ofstream(dir + "/in.json") << "{\"tokens\":" << tokens << ",\"experts\":" << experts << ",\"topk\":" << topk
                                  << ",\"logits\":" << json_list(logits) << "}";
  std::ostringstream command;
  command << "python3 " << MGT_SOURCE_DIR << "/tools/reference/moe_sinkhorn_reference.py " << dir << "/in.json " << dir
          << "/out.json";
  REQUIRE(std::system(command.str().c_str()) == 0);
  simdjson::dom::parser parser;
  const simdjson::padded_string text = simdjson::padded_string::load(dir + "/out.json");
  const simdjson::dom::element want = parser.parse(text);

  auto backend = make_backend("cpu");
  Backend& b = *backend;
  DeviceBuffer logits_d(b, n), balanced(b, n), gates(b, n), probs(b, n), map(b, n), counts(b, 0);
  DeviceArray<double> statistics(b, 2);
  b.copy_from_host(std::span<const float>(logits), logits_d.view());
  const auto read = [&](DeviceBuffer& buffer) {
    std::vector<float> host(static_cast<std::size_t>(n));
    b.copy_to_host(ConstFloatView(buffer.view()), std::span<float>(host));
    return host;
  };
  b.moe_sinkhorn(logits_d.view(), tokens, experts, balanced.view());
  CHECK(relative_error(read(balanced), floats(want["sinkhorn"])) < 1e-4);

  MoeRoutingParams p{tokens, experts, topk};
  p.sinkhorn = true;
  p.sigmoid = topk == 1;
  p.pre_softmax = topk > 1;
  MoeRoutingParams training = p;
  training.choice_scores = balanced.view().data();
  b.moe_route(logits_d.view(), training, gates.view(), probs.view(), map.view(), counts.view(), statistics.view(),
              false);
  CHECK(read(map) == floats(want["routing_map"]));
  CHECK(relative_error(read(probs), floats(want["probs"])) < 1e-6);
  // The balancing moves choices away from the gates' favourites: the two choices differ here.
  CHECK(floats(want["routing_map"]) != floats(want["eval_routing_map"]));
  b.moe_route(logits_d.view(), p, gates.view(), probs.view(), map.view(), counts.view(), statistics.view(), false);
  CHECK(read(map) == floats(want["eval_routing_map"]));
}

}  // namespace

TEST_CASE("moe sinkhorn routing against Megatron's code (Python reference)", "[model][moe]") {
  check_sinkhorn_routing(48, 6, 1, 71);
  check_sinkhorn_routing(40, 8, 2, 72);
  check_sinkhorn_routing(33, 40, 3, 73);
}
