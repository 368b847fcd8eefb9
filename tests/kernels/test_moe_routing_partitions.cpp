// The MoE routing's auxiliary loss over a micro-batch whose sequences are split over ranks
// (MoeRoutingParams::aux_partitions, context parallelism) on the CPU backend: each part routed by
// itself, its counts summed over the parts and its statistic taken against the sums
// (aux_from_counts), adds up to the loss of the whole micro-batch routed at once, and each part's
// logits' gradient is the whole's for its tokens, as Megatron's sequence_partition_group makes
// them (megatron/core/transformer/moe/moe_utils.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"

using namespace mgt;

namespace {

// One routing of `tokens` rows of logits: its outputs and statistics, read back.
struct Routed {
  std::vector<float> gates, probs, map, counts, d_logits;
  double statistics[2] = {};
};

std::vector<float> read(Backend& b, const DeviceBuffer& buffer) {
  std::vector<float> host(static_cast<std::size_t>(buffer.view().size()));
  b.copy_to_host(ConstFloatView(buffer.view()), std::span<float>(host));
  return host;
}

// Rows [first, first + p.tokens) of logits and d_probs ([*, experts]) routed with p; with
// `summed` (non-empty), the partitioned second pass against those counts before the backward.
Routed route(Backend& b, const MoeRoutingParams& p, const std::vector<float>& logits,
             const std::vector<float>& d_probs, int64_t first, const std::vector<float>& summed,
             std::vector<float>* first_pass_counts = nullptr) {
  const int64_t n = p.tokens * p.experts;
  const auto rows = [&](const std::vector<float>& all) {
    return std::span<const float>(all).subspan(static_cast<std::size_t>(first * p.experts), static_cast<std::size_t>(n));
  };
  DeviceBuffer x(b, n), gates(b, n), probs(b, n), map(b, n), dp(b, n), dx(b, n), counts(b, p.aux_groups * p.experts);
  DeviceArray<double> statistics(b, 2);
  b.copy_from_host(rows(logits), x.view());
  b.copy_from_host(rows(d_probs), dp.view());
  b.moe_route(x.view(), p, gates.view(), probs.view(), map.view(), counts.view(), statistics.view(), false);
  Routed r;
  if (first_pass_counts) *first_pass_counts = read(b, counts);
  if (!summed.empty()) {
    b.copy_from_host(std::span<const float>(summed), counts.view());
    MoeRoutingParams second = p;
    second.aux_from_counts = true;
    b.moe_route(x.view(), second, gates.view(), probs.view(), map.view(), counts.view(), statistics.view(), true);
  }
  b.moe_route_backward(x.view(), p, dp.view(), map.view(), counts.view(), 0.7f, 0.3f, dx.view());
  r.gates = read(b, gates);
  r.probs = read(b, probs);
  r.map = read(b, map);
  r.counts = read(b, counts);
  r.d_logits = read(b, dx);
  b.copy_to_host(DeviceSpan<const double>(statistics.view()), std::span<double>(r.statistics));
  return r;
}

// max |got − want| over the rows [first, first + rows) of `want`, relative to max |want|.
double relative_difference(const std::vector<float>& got, const std::vector<float>& want, int64_t first_element) {
  double scale = 0.0, diff = 0.0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  for (std::size_t i = 0; i < got.size(); ++i)
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[static_cast<std::size_t>(first_element) + i]));
  return scale == 0.0 ? diff : diff / scale;
}

}  // namespace

TEST_CASE("moe routing: an auxiliary loss partitioned over ranks adds up to the whole micro-batch's", "[kernels][moe]") {
  auto backend = make_backend("cpu");
  Backend& b = *backend;
  struct Case {
    const char* name;
    int64_t aux_groups;  // 1: aux_loss; the batch: seq_aux_loss
    bool sigmoid;
    int64_t partitions;
  };
  for (const Case c : {Case{"aux_loss, 2 parts", 1, false, 2}, Case{"seq_aux_loss, 2 parts", 2, false, 2},
                       Case{"aux_loss sigmoid, 4 parts", 1, true, 4}, Case{"seq_aux_loss sigmoid, 4 parts", 2, true, 4}}) {
    INFO(c.name);
    // 16 positions of 2 sequences, [s, b] order: a part is a run of whole positions, as a
    // context-parallel rank's chunks are.
    MoeRoutingParams whole{32, 6, 2};
    whole.sigmoid = c.sigmoid;
    whole.aux_groups = c.aux_groups;
    whole.z_loss = true;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    std::vector<float> logits(static_cast<std::size_t>(whole.tokens * whole.experts)), d_probs(logits.size());
    for (float& x : logits) x = normal(rng);
    for (float& x : d_probs) x = normal(rng);
    const Routed all = route(b, whole, logits, d_probs, 0, {});

    MoeRoutingParams part = whole;
    part.tokens = whole.tokens / c.partitions;
    part.aux_partitions = c.partitions;
    // The first passes: each part's own counts, and no auxiliary statistic from them.
    std::vector<float> summed(static_cast<std::size_t>(whole.aux_groups * whole.experts), 0.0f);
    for (int64_t r = 0; r < c.partitions; ++r) {
      std::vector<float> counts;
      const Routed first = route(b, part, logits, d_probs, r * part.tokens, {}, &counts);
      CHECK(first.statistics[0] == 0.0);
      for (std::size_t i = 0; i < summed.size(); ++i) summed[i] += counts[i];
    }
    CHECK(summed == all.counts);
    double aux = 0.0, z = 0.0;
    for (int64_t r = 0; r < c.partitions; ++r) {
      const int64_t first = r * part.tokens;
      const Routed mine = route(b, part, logits, d_probs, first, summed);
      aux += mine.statistics[0];
      z += mine.statistics[1] / static_cast<double>(c.partitions);
      // The second pass leaves the routing as the first made it: the whole's rows.
      const int64_t offset = first * whole.experts;
      CHECK(relative_difference(mine.gates, all.gates, offset) == 0.0);
      CHECK(relative_difference(mine.map, all.map, offset) == 0.0);
      // The auxiliary loss's gradient of a token is the whole's (the same counts and
      // normalisation); the z-loss's is the part's mean's, the whole's times the parts.
      const Routed no_z = [&] {
        MoeRoutingParams q = part;
        q.z_loss = false;
        return route(b, q, logits, d_probs, first, summed);
      }();
      MoeRoutingParams whole_no_z = whole;
      whole_no_z.z_loss = false;
      const Routed all_no_z = route(b, whole_no_z, logits, d_probs, 0, {});
      CHECK(relative_difference(no_z.d_logits, all_no_z.d_logits, offset) < 1e-6);
    }
    CHECK(aux == Approx(all.statistics[0]).epsilon(1e-12));
    CHECK(z == Approx(all.statistics[1]).epsilon(1e-12));
  }
}

TEST_CASE("moe routing refuses aux_partitions below 1", "[kernels][moe]") {
  auto backend = make_backend("cpu");
  Backend& b = *backend;
  MoeRoutingParams p{4, 4, 1};
  p.aux_groups = 1;
  p.aux_partitions = 0;
  DeviceBuffer x(b, 16), gates(b, 16), probs(b, 16), map(b, 16), counts(b, 4);
  DeviceArray<double> statistics(b, 2);
  b.fill(x.view(), 0.5f);
  CHECK_THROWS_WITH(
      b.moe_route(x.view(), p, gates.view(), probs.view(), map.view(), counts.view(), statistics.view(), false),
      Catch::Contains("aux_partitions must be >= 1"));
}
