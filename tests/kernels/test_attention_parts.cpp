// Attention without the causal mask and the log-sum-exp merge of attentions over parts of the
// keys: the two pieces ring attention (model/ring_attention.hpp) is built from.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_testing.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_merge.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

// Every query over every key, from the definition, in fp64: out and lse.
void unmasked_reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                        const AttentionShape& s, float scale, std::vector<double>& out, std::vector<double>& lse) {
  const HeadTensor qt = s.query(), kvt = s.key_value();
  out.assign(q.size(), 0.0);
  lse.assign(static_cast<size_t>(s.batch * s.heads * s.seq_q), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / (s.heads / s.groups);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        std::vector<double> score(static_cast<size_t>(s.seq_kv));
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.seq_kv; ++j) {
          double d = 0.0;
          for (int64_t x = 0; x < s.head_dim; ++x) d += double(q[qt.offset(i, b, h) + x]) * k[kvt.offset(j, b, g) + x];
          score[j] = d * scale;
          max = std::max(max, score[j]);
        }
        double sum = 0.0;
        for (const double x : score) sum += std::exp(x - max);
        const double l = max + std::log(sum);
        lse[(b * s.heads + h) * s.seq_q + i] = l;
        for (int64_t j = 0; j < s.seq_kv; ++j)
          for (int64_t x = 0; x < s.head_dim; ++x)
            out[qt.offset(i, b, h) + x] += std::exp(score[j] - l) * v[kvt.offset(j, b, g) + x];
      }
    }
}

AttentionParams unmasked(float scale) {
  AttentionParams p;
  p.softmax_scale = scale;
  p.causal = false;
  return p;
}

}  // namespace

TEST_CASE("attention without the causal mask sees every key, more queries than keys included", "[kernels][attention]") {
  for (const auto& [seq_q, seq_kv] : {std::pair<int64_t, int64_t>{5, 3}, {3, 7}, {4, 4}}) {
    const AttentionShape s{2, seq_q, seq_kv, 4, 2, 8, SeqLayout::kSeqMajor};
    const std::vector<float> q = random_floats(s.query().elements(), 1), k = random_floats(s.key_value().elements(), 2),
                             v = random_floats(s.key_value().elements(), 3);
    std::vector<float> out(q.size()), lse(static_cast<size_t>(s.batch * s.heads * s.seq_q));
    cpu::attention_forward(q.data(), k.data(), v.data(), s, unmasked(0.35f), out.data(), lse.data());
    std::vector<double> want_out, want_lse;
    unmasked_reference(q, k, v, s, 0.35f, want_out, want_lse);
    INFO(seq_q << " queries, " << seq_kv << " keys");
    CHECK(max_rel_error(out, want_out) < 1e-5);
    CHECK(max_rel_error(lse, want_lse) < 1e-5);
  }
}

TEST_CASE("attention over two parts of the keys, merged by log-sum-exp, is attention over all", "[kernels][attention]") {
  for (const SeqLayout layout : {SeqLayout::kSeqMajor, SeqLayout::kBatchMajor}) {
    const AttentionShape whole{2, 6, 10, 4, 2, 8, layout};
    AttentionShape first = whole, second = whole;
    first.seq_kv = 4;
    second.seq_kv = 6;
    const std::vector<float> q = random_floats(whole.query().elements(), 4);
    const std::vector<float> k = random_floats(whole.key_value().elements(), 5);
    const std::vector<float> v = random_floats(whole.key_value().elements(), 6);
    // The keys' parts in their own buffers (rows [0, 4) and [4, 10) of k and v).
    const auto rows = [&](const std::vector<float>& x, const AttentionShape& part, int64_t from) {
      std::vector<float> y(static_cast<size_t>(part.key_value().elements()));
      for (int64_t t = 0; t < part.seq_kv; ++t)
        for (int64_t b = 0; b < part.batch; ++b)
          for (int64_t g = 0; g < part.groups; ++g)
            for (int64_t d = 0; d < part.head_dim; ++d)
              y[part.key_value().offset(t, b, g) + d] = x[whole.key_value().offset(from + t, b, g) + d];
      return y;
    };
    const std::vector<float> k1 = rows(k, first, 0), v1 = rows(v, first, 0), k2 = rows(k, second, 4),
                             v2 = rows(v, second, 4);
    const size_t lse_n = static_cast<size_t>(whole.batch * whole.heads * whole.seq_q);
    std::vector<float> out(q.size()), lse(lse_n), part_out(q.size()), part_lse(lse_n);
    cpu::attention_forward(q.data(), k1.data(), v1.data(), first, unmasked(0.35f), out.data(), lse.data());
    cpu::attention_forward(q.data(), k2.data(), v2.data(), second, unmasked(0.35f), part_out.data(), part_lse.data());
    cpu::attention_merge(part_out.data(), part_lse.data(), whole.query(), 0, whole.seq_q, out.data(), lse.data());
    std::vector<double> want_out, want_lse;
    unmasked_reference(q, k, v, whole, 0.35f, want_out, want_lse);
    CHECK(max_rel_error(out, want_out) < 1e-5);
    CHECK(max_rel_error(lse, want_lse) < 1e-5);
  }
}

TEST_CASE("a merge into some rows leaves the others, and a row with no keys yet takes the part", "[kernels][attention]") {
  const HeadTensor whole{4, 1, 1, 2, SeqLayout::kSeqMajor};
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out = {1, 1, 2, 2, 3, 3, 4, 4}, lse = {0.0f, -inf, 0.0f, 5.0f};
  const std::vector<float> part_out = {10, 10, 20, 20}, part_lse = {0.0f, 0.0f};
  cpu::attention_merge(part_out.data(), part_lse.data(), whole, 1, 2, out.data(), lse.data());
  // Row 1 had seen nothing: it becomes the part. Row 2: equal weights, (3 + 20) / 2. Rows 0 and 3
  // unchanged.
  CHECK(out == std::vector<float>{1, 1, 10, 10, 11.5f, 11.5f, 4, 4});
  CHECK(lse[0] == 0.0f);
  CHECK(lse[1] == 0.0f);
  CHECK(lse[2] == Approx(std::log(2.0f)));
  CHECK(lse[3] == 5.0f);
}
