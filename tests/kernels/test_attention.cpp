#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "kernel_testing.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/qkv_layout.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

struct Reference {
  std::vector<double> out;
  std::vector<double> lse;
};

// Softmax attention from its definition, one query row at a time. The dropout mask comes from a
// single draw over the whole [batch, heads, seq_q, seq_kv] probability tensor, which pins down
// the documented element numbering independently of how the kernel walks it.
Reference reference_attention(const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, const AttentionShape& s,
                              const AttentionParams& p) {
  const auto qt = s.query();
  const auto kvt = s.key_value();
  std::vector<uint8_t> keep(static_cast<size_t>(s.batch * s.heads * s.seq_q * s.seq_kv), 1);
  if (p.dropout_p > 0.0f) {
    cpu::dropout_keep_mask(p.dropout_key, p.dropout_p, static_cast<int64_t>(keep.size()),
                           keep.data());
  }
  Reference ref{std::vector<double>(q.size(), 0.0),
                std::vector<double>(static_cast<size_t>(s.batch * s.heads * s.seq_q))};
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / (s.heads / s.groups);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const int64_t last = i + s.seq_kv - s.seq_q;
        std::vector<double> score(static_cast<size_t>(last + 1));
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= last; ++j) {
          double dotp = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dotp += q[qt.offset(i, b, h) + d] * k[kvt.offset(j, b, g) + d];
          }
          score[j] = dotp * p.softmax_scale;
          max = std::max(max, score[j]);
        }
        double sum = 0.0;
        for (const double x : score) sum += std::exp(x - max);
        const double lse = max + std::log(sum);
        ref.lse[(b * s.heads + h) * s.seq_q + i] = lse;
        for (int64_t j = 0; j <= last; ++j) {
          const size_t at = static_cast<size_t>(((b * s.heads + h) * s.seq_q + i) * s.seq_kv + j);
          const double prob = std::exp(score[j] - lse) * keep[at] / (1.0 - p.dropout_p);
          for (int64_t d = 0; d < s.head_dim; ++d) {
            ref.out[qt.offset(i, b, h) + d] += prob * v[kvt.offset(j, b, g) + d];
          }
        }
      }
    }
  }
  return ref;
}

struct Case {
  AttentionShape shape;
  float dropout;
};

}  // namespace

TEST_CASE("attention forward and backward match fp64 (GQA, dropout, both layouts)", "[kernels]") {
  const Case cases[] = {
      {{2, 5, 5, 4, 2, 4, SeqLayout::kSeqMajor}, 0.0f},
      {{2, 5, 5, 4, 2, 4, SeqLayout::kBatchMajor}, 0.2f},
      {{1, 3, 6, 3, 1, 5, SeqLayout::kSeqMajor}, 0.1f},  // multi-query, queries after a cache
      {{2, 4, 4, 2, 2, 3, SeqLayout::kSeqMajor}, 0.3f},  // plain multi-head
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    AttentionParams p;
    p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    p.dropout_p = c.dropout;
    p.dropout_key = {77, 3, 1000};
    INFO("batch " << s.batch << " seq_q " << s.seq_q << " seq_kv " << s.seq_kv << " heads "
                  << s.heads << " groups " << s.groups << " dropout " << c.dropout);

    const auto q_size = static_cast<size_t>(s.query().elements());
    const auto kv_size = static_cast<size_t>(s.key_value().elements());
    const auto q = random_floats(q_size, seed++, -2.0f, 2.0f);
    const auto k = random_floats(kv_size, seed++, -2.0f, 2.0f);
    const auto v = random_floats(kv_size, seed++);
    const auto dout = random_floats(q.size(), seed++);
    const auto qd = to_double(q), kd = to_double(k), vd = to_double(v), doutd = to_double(dout);

    std::vector<float> out(q.size()), lse(static_cast<size_t>(s.batch * s.heads * s.seq_q));
    cpu::attention_forward(q.data(), k.data(), v.data(), s, p, out.data(), lse.data());
    const Reference ref = reference_attention(qd, kd, vd, s, p);
    CHECK(rel_error(out, ref.out) < 2e-6);
    CHECK(max_rel_error(out, ref.out) < 2e-6);
    CHECK(max_rel_error(lse, ref.lse) < 1e-6);

    // Garbage in the outputs must not leak into the result: dk/dv are summed, so the kernel
    // has to clear them.
    std::vector<float> dq(q.size(), 9.0f), dk(k.size(), 9.0f), dv(v.size(), 9.0f);
    cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(), s,
                            p, dq.data(), dk.data(), dv.data());
    const auto loss = [&](const std::vector<double>& qx, const std::vector<double>& kx,
                          const std::vector<double>& vx) {
      return dot(reference_attention(qx, kx, vx, s, p).out, doutd);
    };
    const auto want_dq =
        numeric_gradient([&](const std::vector<double>& x) { return loss(x, kd, vd); }, qd);
    const auto want_dk =
        numeric_gradient([&](const std::vector<double>& x) { return loss(qd, x, vd); }, kd);
    const auto want_dv =
        numeric_gradient([&](const std::vector<double>& x) { return loss(qd, kd, x); }, vd);
    CHECK(rel_error(dq, want_dq) < 1e-5);
    CHECK(rel_error(dk, want_dk) < 1e-5);
    CHECK(rel_error(dv, want_dv) < 1e-5);
    CHECK(max_rel_error(dq, want_dq) < 1e-5);
    CHECK(max_rel_error(dk, want_dk) < 1e-5);
    CHECK(max_rel_error(dv, want_dv) < 1e-5);
  }
}

TEST_CASE("attention refuses groups that do not divide heads", "[kernels]") {
  const AttentionShape s{1, 2, 2, 3, 2, 4, SeqLayout::kSeqMajor};
  std::vector<float> buf(64), lse(8);
  AttentionParams p;
  p.softmax_scale = 0.5f;
  CHECK_THROWS_AS(cpu::attention_forward(buf.data(), buf.data(), buf.data(), s, p, buf.data(),
                                         lse.data()),
                  Error);
}

TEST_CASE("fused QKV split follows Megatron's per-group interleaving and merge inverts it",
          "[kernels]") {
  const int64_t tokens = 3, heads = 6, groups = 2, unit = 4;
  const int64_t per_group = heads / groups;
  const int64_t row = (heads + 2 * groups) * unit;
  const auto mixed = random_floats(static_cast<size_t>(tokens * row), 300);
  std::vector<float> q(static_cast<size_t>(tokens * heads * unit));
  std::vector<float> k(static_cast<size_t>(tokens * groups * unit)), v(k.size());
  cpu::qkv_split(mixed.data(), tokens, heads, groups, unit, q.data(), k.data(), v.data());

  // Rows of group j: q heads j·per_group … (j+1)·per_group − 1, then k_j, then v_j.
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < groups; ++j) {
      const int64_t group_at = t * row + j * (per_group + 2) * unit;
      for (int64_t e = 0; e < unit; ++e) {
        for (int64_t r = 0; r < per_group; ++r) {
          CHECK(q[(t * heads + j * per_group + r) * unit + e] == mixed[group_at + r * unit + e]);
        }
        CHECK(k[(t * groups + j) * unit + e] == mixed[group_at + per_group * unit + e]);
        CHECK(v[(t * groups + j) * unit + e] == mixed[group_at + (per_group + 1) * unit + e]);
      }
    }
  }

  std::vector<float> merged(mixed.size(), 0.0f);
  cpu::qkv_merge(q.data(), k.data(), v.data(), tokens, heads, groups, unit, merged.data());
  CHECK(merged == mixed);

  // A tensor-parallel shard holding group 1 only splits like the second half of the full one.
  std::vector<float> shard(static_cast<size_t>(row / 2));
  std::copy_n(mixed.begin() + row / 2, row / 2, shard.begin());
  std::vector<float> q1(static_cast<size_t>(per_group * unit)), k1(unit), v1(unit);
  cpu::qkv_split(shard.data(), 1, per_group, 1, unit, q1.data(), k1.data(), v1.data());
  CHECK(std::equal(q1.begin(), q1.end(), q.begin() + per_group * unit));
  CHECK(std::equal(k1.begin(), k1.end(), k.begin() + unit));
  CHECK(std::equal(v1.begin(), v1.end(), v.begin() + unit));
}
