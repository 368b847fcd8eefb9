// The CPU backend's MoE routing (Backend::moe_route, moe_route_backward) against a NumPy
// reference written from Megatron-Core's code (tools/reference/moe_router_reference.py) on random
// logits: the gates, the dropped tokens, the auxiliary-loss and z-loss statistics, and the
// logits' gradient (the reference's by central differences). Skipped where python3 with NumPy
// is missing.
#include <catch2/catch.hpp>

#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"
#include "skipped_tests.hpp"
#include "json_list_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using mgt::test::json_list;

namespace {

struct RoutingCase {
  const char* name;
  MoeRoutingParams params;
  const char* load_balancing;  // aux_loss | seq_aux_loss | none
  double capacity_factor;      // < 0: dropless
  bool pad_to_capacity;
};

bool numpy_available() { return std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

std::vector<double> doubles(simdjson::dom::element e) {
  std::vector<double> v;
  for (double x : e.get_array()) v.push_back(x);
  return v;
}

// max |got − want| / max |want|, 0 where both are all zero.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double scale = 0.0, diff = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return scale == 0.0 ? diff : diff / scale;
}

void check_case(const RoutingCase& c, std::uint32_t seed) {
  INFO(c.name);
  const MoeRoutingParams& p = c.params;
  const int64_t n = p.tokens * p.experts;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(static_cast<std::size_t>(n)), d_probs(static_cast<std::size_t>(n));
  for (float& x : logits) x = normal(rng);
  for (float& x : d_probs) x = normal(rng);
  const float aux_grad = p.aux_groups > 0 ? 0.7f : 0.0f;
  const float z_grad = p.z_loss ? 0.3f : 0.0f;

  const std::string dir = test::scratch_dir(std::string("moe_router_reference_") + c.name);
  {
    std::ofstream in(dir + "/in.json");
    in << "{\"tokens\":" << p.tokens << ",\"experts\":" << p.experts << ",\"topk\":" << p.topk
       << ",\"score_function\":\"" << (p.sigmoid ? "sigmoid" : "softmax") << "\",\"pre_softmax\":"
       << (p.pre_softmax ? "true" : "false") << ",\"num_groups\":" << p.num_groups << ",\"group_topk\":" << p.group_topk
       << ",\"scaling_factor\":" << p.scaling_factor << ",\"capacity_factor\":"
       << (c.capacity_factor < 0 ? std::string("null") : std::to_string(c.capacity_factor)) << ",\"drop_policy\":\""
       << (p.drop_by_position ? "position" : "probs") << "\",\"pad_to_capacity\":" << (c.pad_to_capacity ? "true" : "false")
       << ",\"load_balancing\":\"" << c.load_balancing << "\",\"batch\":" << std::max<int64_t>(p.aux_groups, 1)
       << ",\"z_loss\":" << (p.z_loss ? "true" : "false") << ",\"aux_grad\":" << aux_grad << ",\"z_grad\":" << z_grad
       << ",\"logits\":" << json_list(logits) << ",\"d_probs\":" << json_list(d_probs) << "}";
  }
  std::ostringstream command;
  command << "python3 " << MGT_SOURCE_DIR << "/tools/reference/moe_router_reference.py " << dir << "/in.json " << dir
          << "/out.json";
  REQUIRE(std::system(command.str().c_str()) == 0);

  auto backend = make_backend("cpu");
  Backend& b = *backend;
  DeviceBuffer logits_d(b, n), gates(b, n), probs(b, n), map(b, n), d_probs_d(b, n), d_logits(b, n);
  DeviceBuffer counts(b, p.aux_groups * p.experts);
  DeviceArray<double> statistics(b, 2);
  b.copy_from_host(std::span<const float>(logits), logits_d.view());
  b.copy_from_host(std::span<const float>(d_probs), d_probs_d.view());
  b.moe_route(logits_d.view(), p, gates.view(), probs.view(), map.view(), counts.view(), statistics.view(), false);
  b.moe_route_backward(logits_d.view(), p, d_probs_d.view(), map.view(), counts.view(), aux_grad, z_grad,
                       d_logits.view());
  auto read = [&](DeviceBuffer& buffer) {
    std::vector<float> host(static_cast<std::size_t>(buffer.view().size()));
    b.copy_to_host(ConstFloatView(buffer.view()), std::span<float>(host));
    return host;
  };
  double stats[2] = {};
  b.copy_to_host(DeviceSpan<const double>(statistics.view()), std::span<double>(stats));

  simdjson::dom::parser parser;
  const simdjson::padded_string text = simdjson::padded_string::load(dir + "/out.json");
  const simdjson::dom::element want = parser.parse(text);
  CHECK(relative_error(read(gates), doubles(want["gates"])) < 1e-6);
  CHECK(relative_error(read(probs), doubles(want["probs"])) < 1e-6);
  // The tokens kept, exactly: the dropped ones are Megatron's.
  CHECK(relative_error(read(map), doubles(want["routing_map"])) == 0.0);
  if (p.aux_groups > 0) {
    CHECK(relative_error(read(counts), doubles(want["tokens_per_expert"])) == 0.0);
    CHECK(stats[0] == Approx(double(want["aux_statistic"].get_double().value())).epsilon(1e-6));
  }
  if (p.z_loss) CHECK(stats[1] == Approx(double(want["z_statistic"].get_double().value())).epsilon(1e-6));
  // Central differences in float64 against the float32 gradient.
  CHECK(relative_error(read(d_logits), doubles(want["d_logits"])) < 1e-4);
  if (c.pad_to_capacity) {
    // Megatron's map with padding adds tokens of probability 0, which change no output.
    const std::vector<double> padded = doubles(want["megatron_routing_map"]);
    const std::vector<float> kept = read(map);
    for (std::size_t i = 0; i < kept.size(); ++i)
      if (kept[i] > 0.0f) CHECK(padded[i] == 1.0);
  }
}

MoeRoutingParams routing(int64_t tokens, int64_t experts, int64_t topk) {
  MoeRoutingParams p;
  p.tokens = tokens;
  p.experts = experts;
  p.topk = topk;
  return p;
}

}  // namespace

TEST_CASE("moe routing against Megatron's code (NumPy reference)", "[model][moe]") {
  if (!numpy_available()) {
    mgt::testing::skip_test("python3 with numpy is not available");
    return;
  }
  std::vector<RoutingCase> cases;
  {  // Mixtral's: softmax after the top-2 choice, aux_loss, z-loss, no dropping.
    MoeRoutingParams p = routing(24, 8, 2);
    p.aux_groups = 1;
    p.z_loss = true;
    cases.push_back({"mixtral", p, "aux_loss", -1.0, false});
  }
  {  // Capacity 1.0, dropping by probability, with padding; the per-sequence auxiliary loss.
    MoeRoutingParams p = routing(24, 4, 2);
    p.aux_groups = 3;
    cases.push_back({"capacity_probs", p, "seq_aux_loss", 1.0, true});
  }
  {  // Pre-softmax top-1 with a scaling factor, capacity 1.25 dropping by position.
    MoeRoutingParams p = routing(20, 4, 1);
    p.pre_softmax = true;
    p.scaling_factor = 2.0f;
    p.drop_by_position = true;
    p.aux_groups = 1;
    cases.push_back({"capacity_position", p, "aux_loss", 1.25, false});
  }
  {  // DeepSeek-style: sigmoid scores, group-limited top-4 of 8 experts in 4 groups (2 chosen).
    MoeRoutingParams p = routing(16, 8, 4);
    p.sigmoid = true;
    p.num_groups = 4;
    p.group_topk = 2;
    p.scaling_factor = 2.5f;
    p.aux_groups = 2;
    p.z_loss = true;
    cases.push_back({"sigmoid_groups", p, "seq_aux_loss", -1.0, false});
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    RoutingCase& c = cases[i];
    if (c.capacity_factor >= 0)
      c.params.capacity = static_cast<int64_t>(
          std::ceil(static_cast<double>(c.params.tokens * c.params.topk) / static_cast<double>(c.params.experts) *
                    c.capacity_factor));
    check_case(c, static_cast<std::uint32_t>(100 + i));
  }
}
