// Attention on a tensor-parallel rank's heads: with dropout_heads and dropout_first_head the
// shard draws exactly its heads' part of the unsharded dropout mask, so its outputs and
// gradients are the matching slices of the unsharded call's.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernel_testing.hpp"
#include "kernels/cpu/attention.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

// Heads [first, first + count) of a seq-major [seq, batch, heads, dim] tensor.
std::vector<float> head_slice(const std::vector<float>& x, int64_t seq, int64_t batch,
                              int64_t heads, int64_t dim, int64_t first, int64_t count) {
  std::vector<float> out;
  for (int64_t i = 0; i < seq * batch; ++i)
    for (int64_t h = first; h < first + count; ++h)
      for (int64_t d = 0; d < dim; ++d)
        out.push_back(x[static_cast<size_t>((i * heads + h) * dim + d)]);
  return out;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

}  // namespace

TEST_CASE("attention on a shard of the heads draws its part of the unsharded dropout mask",
          "[kernels]") {
  const AttentionShape whole{2, 6, 6, 4, 2, 4, SeqLayout::kSeqMajor};
  AttentionParams p;
  p.softmax_scale = 0.5f;
  p.dropout_p = 0.3f;
  p.dropout_key = {5, 9, 100};
  const int64_t q_size = whole.query().elements();
  const int64_t kv_size = whole.key_value().elements();
  const std::vector<float> q = random_floats(static_cast<size_t>(q_size), 1);
  const std::vector<float> k = random_floats(static_cast<size_t>(kv_size), 2);
  const std::vector<float> v = random_floats(static_cast<size_t>(kv_size), 3);
  const std::vector<float> dout = random_floats(static_cast<size_t>(q_size), 4);
  std::vector<float> out(static_cast<size_t>(q_size)), lse(static_cast<size_t>(2 * 4 * 6));
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  cpu::attention_forward(q.data(), k.data(), v.data(), whole, p, out.data(), lse.data());
  cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(),
                          whole, p, dq.data(), dk.data(), dv.data());

  // Two ranks: heads {0, 1} with group 0, heads {2, 3} with group 1.
  for (int64_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const AttentionShape shard{2, 6, 6, 2, 1, 4, SeqLayout::kSeqMajor};
    AttentionParams ps = p;
    ps.dropout_heads = 4;
    ps.dropout_first_head = 2 * rank;
    const auto qs = head_slice(q, 6, 2, 4, 4, 2 * rank, 2);
    const auto ks = head_slice(k, 6, 2, 2, 4, rank, 1);
    const auto vs = head_slice(v, 6, 2, 2, 4, rank, 1);
    const auto douts = head_slice(dout, 6, 2, 4, 4, 2 * rank, 2);
    std::vector<float> outs(qs.size()), lses(static_cast<size_t>(2 * 2 * 6));
    std::vector<float> dqs(qs.size()), dks(ks.size()), dvs(vs.size());
    cpu::attention_forward(qs.data(), ks.data(), vs.data(), shard, ps, outs.data(), lses.data());
    cpu::attention_backward(qs.data(), ks.data(), vs.data(), outs.data(), douts.data(),
                            lses.data(), shard, ps, dqs.data(), dks.data(), dvs.data());
    CHECK(max_difference(outs, head_slice(out, 6, 2, 4, 4, 2 * rank, 2)) < 1e-6);
    CHECK(max_difference(dqs, head_slice(dq, 6, 2, 4, 4, 2 * rank, 2)) < 1e-6);
    CHECK(max_difference(dks, head_slice(dk, 6, 2, 2, 4, rank, 1)) < 1e-6);
    CHECK(max_difference(dvs, head_slice(dv, 6, 2, 2, 4, rank, 1)) < 1e-6);

    // Without the global numbering the shard would draw the first heads' mask instead.
    ps.dropout_heads = 0;
    ps.dropout_first_head = 0;
    cpu::attention_forward(qs.data(), ks.data(), vs.data(), shard, ps, outs.data(), lses.data());
    if (rank == 1) CHECK(max_difference(outs, head_slice(out, 6, 2, 4, 4, 2, 2)) > 1e-3);
  }

  AttentionParams bad = p;
  bad.dropout_heads = 4;
  bad.dropout_first_head = 3;  // heads 3…6 of 4
  CHECK_THROWS(cpu::attention_forward(q.data(), k.data(), v.data(), whole, bad, out.data(),
                                      lse.data()));
}
