#include <catch2/catch.hpp>

#include <vector>

#include "kernel_testing.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/embedding.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

TEST_CASE("embedding lookup zeroes ids outside the local vocabulary slice", "[kernels]") {
  const int64_t vocab = 10, hidden = 3, start = 4, local = 5;  // this rank holds ids 4..8
  const auto full = random_floats(vocab * hidden, 101);
  const std::vector<float> slice(full.begin() + start * hidden,
                                 full.begin() + (start + local) * hidden);
  const std::vector<int64_t> ids = {0, 4, 8, 9, 6, 3, 4};
  std::vector<float> out(ids.size() * hidden, -1.0f);
  cpu::embedding_forward(ids.data(), static_cast<int64_t>(ids.size()), slice.data(), start, local,
                         hidden, out.data());
  for (size_t t = 0; t < ids.size(); ++t) {
    const bool local_id = ids[t] >= start && ids[t] < start + local;
    for (int64_t i = 0; i < hidden; ++i) {
      CHECK(out[t * hidden + i] == (local_id ? full[ids[t] * hidden + i] : 0.0f));
    }
  }
}

TEST_CASE("vocab-parallel embedding: the sum over slices is the full lookup", "[kernels]") {
  const int64_t vocab = 12, hidden = 4, n = 9;
  const auto table = random_floats(vocab * hidden, 111);
  const std::vector<int64_t> ids = {11, 0, 5, 6, 5, 2, 9, 6, 1};
  std::vector<float> full(n * hidden), sum(n * hidden, 0.0f), part(n * hidden);
  cpu::embedding_forward(ids.data(), n, table.data(), 0, vocab, hidden, full.data());
  for (int64_t rank = 0; rank < 2; ++rank) {
    const int64_t start = rank * vocab / 2;
    cpu::embedding_forward(ids.data(), n, table.data() + start * hidden, start, vocab / 2, hidden,
                           part.data());
    cpu::accumulate(sum.data(), part.data(), n * hidden);
  }
  CHECK(sum == full);
}

TEST_CASE("embedding backward scatter-adds into the local rows", "[kernels]") {
  const int64_t hidden = 3, start = 2, local = 4;
  const std::vector<int64_t> ids = {3, 1, 3, 5, 7, 2};  // 3 twice; 1 and 7 are not local
  const int64_t n = static_cast<int64_t>(ids.size());
  const auto dout = random_floats(n * hidden, 121);
  auto dtable = random_floats(local * hidden, 122);
  std::vector<double> want = to_double(dtable);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t row = ids[t] - start;
    if (row < 0 || row >= local) continue;
    for (int64_t i = 0; i < hidden; ++i) want[row * hidden + i] += dout[t * hidden + i];
  }
  cpu::embedding_backward(ids.data(), n, dout.data(), start, local, hidden, dtable.data());
  CHECK(rel_error(dtable, want) < 1e-6);
}
