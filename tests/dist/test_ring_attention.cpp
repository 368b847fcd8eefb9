// Ring attention over the context-parallel group (model/ring_attention.hpp) against the attention
// of the whole sequence on one rank: every rank holds its two chunks of random queries, keys and
// values, and its outputs, log-sum-exps and gradients must be the whole attention's at its
// positions — causal and not, with as many key/value heads as query heads and with fewer (GQA).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "dist/dist_testing.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/context_parallel_split.hpp"
#include "model/ring_attention.hpp"

using namespace mgt;
using mgt::dist_test::runtime;

namespace {

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(static_cast<double>(gen() >> 8) / 16777216.0 * 2.0 - 1.0);
  return x;
}

// Rows `positions` of a sequence-major [s, rest] tensor.
std::vector<float> rows_of(const std::vector<float>& x, int64_t row_size, const std::vector<int64_t>& positions) {
  std::vector<float> y;
  for (const int64_t p : positions)
    y.insert(y.end(), x.begin() + p * row_size, x.begin() + (p + 1) * row_size);
  return y;
}

// Columns `positions` of a [b·heads, s] log-sum-exp.
std::vector<float> lse_of(const std::vector<float>& lse, int64_t pairs, int64_t seq, const std::vector<int64_t>& positions) {
  std::vector<float> y;
  for (int64_t r = 0; r < pairs; ++r)
    for (const int64_t p : positions) y.push_back(lse[static_cast<size_t>(r * seq + p)]);
  return y;
}

double relative_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

struct Buffers {
  DeviceBuffer q, k, v, out, lse, dout, dq, dk, dv;
};

Buffers buffers(Backend& be, const AttentionShape& s) {
  const int64_t qn = s.query().elements(), kvn = s.key_value().elements(), ln = s.batch * s.heads * s.seq_q;
  return {DeviceBuffer(be, qn), DeviceBuffer(be, kvn), DeviceBuffer(be, kvn), DeviceBuffer(be, qn),
          DeviceBuffer(be, ln), DeviceBuffer(be, qn),  DeviceBuffer(be, qn),  DeviceBuffer(be, kvn),
          DeviceBuffer(be, kvn)};
}

std::vector<float> read(Backend& be, const DeviceBuffer& b) {
  std::vector<float> x(static_cast<size_t>(b.size()));
  be.copy_to_host(b.view(), std::span<float>(x));
  return x;
}

}  // namespace

TEST_CASE("ring attention reproduces the whole sequence's attention and its gradients", "[dist][cp]") {
  const int world = runtime().world_size();
  dist::ParallelFlags flags;
  flags.context_parallel_size = world;
  dist::ProcessGroups groups = dist::make_process_groups(runtime(), dist::ParallelLayout(flags, world));
  dist::Communicator& cp = *groups.context_parallel;
  const auto backend = make_backend("cpu");
  Backend& be = *backend;
  RingAttention ring(be, cp);

  for (const bool causal : {true, false})
    for (const int64_t groups_count : {4, 2}) {
      const int64_t chunk = 3;
      const AttentionShape whole{2, 2 * world * chunk, 2 * world * chunk, 4, groups_count, 8, SeqLayout::kSeqMajor};
      AttentionShape local = whole;
      local.seq_q = local.seq_kv = 2 * chunk;
      AttentionParams params;
      params.softmax_scale = 0.4f;
      params.causal = causal;
      INFO((causal ? "causal" : "not causal") << ", " << groups_count << " key/value heads, CP " << world);

      // Every rank draws the same whole tensors and computes the reference itself.
      const std::vector<float> q = random_values(static_cast<size_t>(whole.query().elements()), 1);
      const std::vector<float> k = random_values(static_cast<size_t>(whole.key_value().elements()), 2);
      const std::vector<float> v = random_values(static_cast<size_t>(whole.key_value().elements()), 3);
      const std::vector<float> dout = random_values(static_cast<size_t>(whole.query().elements()), 4);
      Buffers ref = buffers(be, whole);
      be.copy_from_host(std::span<const float>(q), ref.q.view());
      be.copy_from_host(std::span<const float>(k), ref.k.view());
      be.copy_from_host(std::span<const float>(v), ref.v.view());
      be.copy_from_host(std::span<const float>(dout), ref.dout.view());
      be.attention_forward(ref.q.view(), ref.k.view(), ref.v.view(), whole, params, ref.out.view(), ref.lse.view());
      be.attention_backward(ref.q.view(), ref.k.view(), ref.v.view(), ref.out.view(), ref.dout.view(), ref.lse.view(),
                            whole, params, ref.dq.view(), ref.dk.view(), ref.dv.view());

      const std::vector<int64_t> mine = context_parallel_positions(whole.seq_q, world, cp.rank());
      const int64_t q_row = whole.batch * whole.heads * whole.head_dim;
      const int64_t kv_row = whole.batch * whole.groups * whole.head_dim;
      Buffers got = buffers(be, local);
      be.copy_from_host(std::span<const float>(rows_of(q, q_row, mine)), got.q.view());
      be.copy_from_host(std::span<const float>(rows_of(k, kv_row, mine)), got.k.view());
      be.copy_from_host(std::span<const float>(rows_of(v, kv_row, mine)), got.v.view());
      be.copy_from_host(std::span<const float>(rows_of(dout, q_row, mine)), got.dout.view());
      ring.forward(got.q.view(), got.k.view(), got.v.view(), local, params, got.out.view(), got.lse.view());
      ring.backward(got.q.view(), got.k.view(), got.v.view(), got.out.view(), got.dout.view(), got.lse.view(), local,
                    params, got.dq.view(), got.dk.view(), got.dv.view());

      CHECK(relative_difference(read(be, got.out), rows_of(read(be, ref.out), q_row, mine)) < 1e-5);
      CHECK(relative_difference(read(be, got.lse),
                                lse_of(read(be, ref.lse), whole.batch * whole.heads, whole.seq_q, mine)) < 1e-5);
      CHECK(relative_difference(read(be, got.dq), rows_of(read(be, ref.dq), q_row, mine)) < 1e-5);
      CHECK(relative_difference(read(be, got.dk), rows_of(read(be, ref.dk), kv_row, mine)) < 1e-5);
      CHECK(relative_difference(read(be, got.dv), rows_of(read(be, ref.dv), kv_row, mine)) < 1e-5);
    }
}
