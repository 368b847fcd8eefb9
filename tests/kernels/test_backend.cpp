#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/backend.hpp"
#include "kernels/staged_uploads.hpp"

using namespace mgt;

namespace {

// offset + sin(0.37 i + phase): values that tell positions apart, never all zero.
DeviceBuffer wave(Backend& backend, int64_t size, float phase, float offset = 0.0f) {
  DeviceBuffer b(backend, size);
  std::vector<float> v(static_cast<size_t>(size));
  for (size_t i = 0; i < v.size(); ++i) v[i] = offset + std::sin(0.37f * static_cast<float>(i) + phase);
  backend.copy_from_host(v, b.view());
  return b;
}

std::vector<float> values_of(Backend& backend, const DeviceBuffer& b) {
  std::vector<float> v(static_cast<size_t>(b.size()));
  backend.copy_to_host(b.view(), v);
  return v;
}

}  // namespace

TEST_CASE("DeviceArray owns backend memory and moves", "[model]") {
  CpuBackend backend;
  DeviceBuffer a(backend, 5);
  backend.fill(a.view(), 2.5f);
  DeviceBuffer b = std::move(a);
  CHECK(a.empty());
  CHECK(b.size() == 5);
  std::vector<float> host(5);
  backend.copy_to_host(b.view(), host);
  CHECK(host == std::vector<float>(5, 2.5f));

  // Fresh CPU allocations read as NaN until written, so use of unwritten memory shows.
  DeviceBuffer fresh(backend, 3);
  backend.copy_to_host(fresh.view(), std::span<float>(host).first(3));
  CHECK(std::isnan(host[0]));

  DeviceIndexBuffer ids(backend, 3);
  const std::vector<int64_t> values = {4, 5, 6};
  backend.copy_from_host<int64_t>(values, ids.view());
  std::vector<int64_t> back(3);
  backend.copy_to_host(ids.view(), back);
  CHECK(back == values);
}

namespace {

// The CPU backend, counting the shareable allocations it hands out and takes back.
class ShareableCountingBackend final : public CpuBackend {
public:
  int64_t live = 0;

private:
  void* do_allocate_shareable(size_t bytes) override {
    ++live;
    return new std::byte[bytes];
  }
  void do_free_shareable(void* data, size_t /*bytes*/) noexcept override {
    --live;
    delete[] static_cast<std::byte*>(data);
  }
};

}  // namespace

TEST_CASE("Shareable allocations go through the backend's shareable hooks and move with their kind", "[model]") {
  ShareableCountingBackend backend;
  {
    DeviceBuffer shared(backend, 4, FloatType::kF32, MemorySharing::kShareable);
    CHECK(backend.live == 1);
    backend.fill(shared.view(), 1.5f);
    DeviceBuffer moved = std::move(shared);
    CHECK(shared.empty());
    CHECK(values_of(backend, moved) == std::vector<float>(4, 1.5f));
    moved = DeviceBuffer(backend, 2);  // the shareable block goes back as shareable
    CHECK(backend.live == 0);
    DeviceBuffer private_buffer(backend, 3);
    CHECK(backend.live == 0);
  }
  CHECK(backend.live == 0);
}

TEST_CASE("DeviceSpan subspans are bounds-checked", "[model]") {
  CpuBackend backend;
  DeviceBuffer a(backend, 10);
  CHECK(a.view().subspan(2, 8).size() == 8);
  CHECK_THROWS_AS(a.view().subspan(3, 8), Error);
  CHECK_THROWS_AS(a.view().subspan(-1, 1), Error);
  ConstFloatView c = a.view();  // mutable converts to read-only
  CHECK(c.size() == 10);
}

TEST_CASE("Backend operations check view sizes", "[model]") {
  CpuBackend backend;
  DeviceBuffer x(backend, 6);
  DeviceBuffer w(backend, 6);
  DeviceBuffer y(backend, 5);
  CHECK_THROWS_WITH(backend.linear_forward(x.view(), w.view(), {}, 2, 3, 2, y.view()),
                    "Backend::linear_forward: y has 5 elements, expected 4");
  CHECK_THROWS_WITH(backend.add(x.view(), y.view(), x.view()),
                    "Backend::add: b has 5 elements, expected 6");
  CHECK_THROWS_WITH(backend.copy_from_host(std::vector<float>(3), x.view()),
                    Catch::Contains("source has 3 elements, destination 6"));
}

TEST_CASE("CpuBackend linear and loss operations compute through the kernels", "[model]") {
  CpuBackend backend;
  // y = x·Wᵀ + b with x [1, 2], W [2, 2].
  DeviceBuffer x(backend, 2), w(backend, 4), b(backend, 2), y(backend, 2);
  backend.copy_from_host(std::vector<float>{1, 2}, x.view());
  backend.copy_from_host(std::vector<float>{1, 0, 3, 4}, w.view());
  backend.copy_from_host(std::vector<float>{0.5f, -1}, b.view());
  backend.linear_forward(x.view(), w.view(), b.view(), 1, 2, 2, y.view());
  std::vector<float> host(2);
  backend.copy_to_host(y.view(), host);
  CHECK(host == std::vector<float>{1.5f, 10.0f});
  CHECK(backend.sum_of_squares(y.view()) == Approx(1.5 * 1.5 + 100.0));
  const std::vector<ElementRange> second_only{{1, 1}, {2, 0}};
  CHECK(backend.sum_of_squares(y.view(), second_only) == 100.0);
  CHECK_THROWS_WITH(backend.sum_of_squares(y.view(), std::vector<ElementRange>{{1, 2}}),
                    Catch::Contains("range [1, +2) outside the 2 elements"));

  DeviceBuffer mask(backend, 2);
  backend.copy_from_host(std::vector<float>{1, 0}, mask.view());
  const MaskedLossSum sum = backend.masked_loss_sum(y.view(), mask.view());
  CHECK(sum.loss_sum == 1.5);
  CHECK(sum.tokens == 1.0);

  // Kept on the device: written by the first call, added to by the next.
  DeviceArray<double> sums(backend, 2);
  backend.masked_loss_sum_on_device(y.view(), mask.view(), sums.view(), false);
  backend.copy_from_host(std::vector<float>{1, 1}, mask.view());
  backend.masked_loss_sum_on_device(y.view(), mask.view(), sums.view(), true);
  std::vector<double> both(2);
  backend.copy_to_host(DeviceSpan<const double>(sums.view()), std::span<double>(both));
  CHECK(both == std::vector<double>{1.5 + 11.5, 1.0 + 2.0});
  DeviceArray<double> wrong(backend, 3);
  CHECK_THROWS_WITH(backend.masked_loss_sum_on_device(y.view(), mask.view(), wrong.view(), false),
                    Catch::Contains("sums must hold 2 values"));
}

TEST_CASE("timed queue events on the CPU: the host time between them", "[model]") {
  CpuBackend backend;
  const std::unique_ptr<QueueEvent> before = backend.record_timed_event();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::unique_ptr<QueueEvent> after = backend.record_timed_event();
  CHECK(after->seconds_since(*before) >= 0.019);
  CHECK(before->seconds_since(*before) == 0.0);
}

TEST_CASE("asynchronous copies and queue events on the CPU: complete at once", "[model]") {
  CpuBackend backend;
  PinnedHostArray<int64_t> staging(backend, 4);
  for (int64_t i = 0; i < 4; ++i) staging.host()[static_cast<size_t>(i)] = 10 + i;
  DeviceIndexBuffer device(backend, 4);
  backend.copy_from_host_async<int64_t>(staging.host(), device.view());
  backend.record_event()->wait();
  std::vector<int64_t> back(4);
  backend.copy_to_host(ConstIndexView(device.view()), back);
  CHECK(back == std::vector<int64_t>{10, 11, 12, 13});
  PinnedHostArray<int64_t> moved = std::move(staging);
  CHECK(moved.size() == 4);
  CHECK(staging.size() == 0);
  CHECK_THROWS(backend.copy_from_host_async<int64_t>(moved.host().first(3), device.view()));
}

TEST_CASE("copy_ranges copies each range and refuses ranges outside the views", "[model]") {
  CpuBackend backend;
  DeviceBuffer src(backend, 10);
  DeviceBuffer dst(backend, 6);
  backend.copy_from_host(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, src.view());
  backend.fill(dst.view(), -1.0f);
  const std::vector<CopyRange> ranges = {{7, 0, 3}, {1, 4, 2}, {5, 3, 0}};
  backend.copy_ranges(src.view(), dst.view(), ranges);
  std::vector<float> host(6);
  backend.copy_to_host(dst.view(), host);
  CHECK(host == std::vector<float>{7, 8, 9, -1, 1, 2});

  const std::vector<CopyRange> past_end = {{8, 0, 3}};
  CHECK_THROWS_WITH(backend.copy_ranges(src.view(), dst.view(), past_end),
                    Catch::Contains("lies outside views of 10 and 6 elements"));
  DeviceBuffer narrow(backend, 6, FloatType::kBf16);
  CHECK_THROWS_WITH(backend.copy_ranges(src.view(), narrow.view(), ranges), Catch::Contains("types differ"));
}

TEST_CASE("attention on the fused QKV projection is the split followed by attention", "[model]") {
  CpuBackend backend;
  const AttentionShape s{2, 16, 16, 3, 3, 8, SeqLayout::kSeqMajor};
  AttentionParams params;
  params.softmax_scale = 0.35f;
  const int64_t n = s.query().elements();
  const int64_t tokens = s.batch * s.seq_q;
  const int64_t rows = s.batch * s.heads * s.seq_q;
  const DeviceBuffer mixed = wave(backend, 3 * n, 0.1f);
  const DeviceBuffer dout = wave(backend, n, 0.7f);
  DeviceBuffer q(backend, n), k(backend, n), v(backend, n), out(backend, n), lse(backend, rows);
  DeviceBuffer dq(backend, n), dk(backend, n), dv(backend, n), d_mixed(backend, 3 * n);
  backend.qkv_split(mixed.view(), tokens, s.heads, s.groups, s.head_dim, q.view(), k.view(), v.view());
  backend.attention_forward(q.view(), k.view(), v.view(), s, params, out.view(), lse.view());
  backend.attention_backward(q.view(), k.view(), v.view(), out.view(), dout.view(), lse.view(), s, params,
                             dq.view(), dk.view(), dv.view());
  backend.qkv_merge(dq.view(), dk.view(), dv.view(), tokens, s.heads, s.groups, s.head_dim, d_mixed.view());

  DeviceBuffer fused_out(backend, n), fused_lse(backend, rows), fused_d_mixed(backend, 3 * n);
  CHECK_FALSE(backend.attends_fused_qkv(s, params));
  backend.attention_forward_fused_qkv(mixed.view(), s, params, fused_out.view(), fused_lse.view());
  backend.attention_backward_fused_qkv(mixed.view(), fused_out.view(), dout.view(), fused_lse.view(), s, params,
                                       fused_d_mixed.view());
  CHECK(values_of(backend, fused_out) == values_of(backend, out));
  CHECK(values_of(backend, fused_lse) == values_of(backend, lse));
  CHECK(values_of(backend, fused_d_mixed) == values_of(backend, d_mixed));

  const AttentionShape grouped{2, 16, 16, 4, 2, 8, SeqLayout::kSeqMajor};
  CHECK_THROWS_WITH(backend.attention_forward_fused_qkv(mixed.view(), grouped, params, out.view(), lse.view()),
                    Catch::Contains("groups == heads only"));
}

TEST_CASE("norm backwards add the input gradient to dx when asked", "[model]") {
  CpuBackend backend;
  const int64_t rows = 3, hidden = 8;
  const DeviceBuffer x = wave(backend, rows * hidden, 0.2f, 1.0f), dy = wave(backend, rows * hidden, 0.9f, 0.0f);
  const DeviceBuffer weight = wave(backend, hidden, 0.4f, 1.0f), bias = wave(backend, hidden, 1.3f, 0.0f);
  DeviceBuffer y(backend, rows * hidden), mean(backend, rows), rstd(backend, rows);
  backend.layer_norm_forward(x.view(), weight.view(), bias.view(), rows, hidden, 1e-5f, y.view(), mean.view(),
                             rstd.view());
  DeviceBuffer dx(backend, rows * hidden), dweight(backend, hidden), dbias(backend, hidden);
  backend.fill(dweight.view(), 0.0f);
  backend.fill(dbias.view(), 0.0f);
  backend.layer_norm_backward(dy.view(), x.view(), weight.view(), mean.view(), rstd.view(), rows, hidden, dx.view(),
                              dweight.view(), dbias.view());
  const DeviceBuffer residual = wave(backend, rows * hidden, 2.1f, 0.5f);
  DeviceBuffer sum = wave(backend, rows * hidden, 2.1f, 0.5f);
  backend.layer_norm_backward(dy.view(), x.view(), weight.view(), mean.view(), rstd.view(), rows, hidden,
                              sum.view(), dweight.view(), dbias.view(), /*accumulate_dx=*/true);
  const std::vector<float> g = values_of(backend, dx), r = values_of(backend, residual), got = values_of(backend, sum);
  for (size_t i = 0; i < g.size(); ++i) CHECK(got[i] == r[i] + g[i]);

  DeviceBuffer rdx(backend, rows * hidden), rdweight(backend, hidden);
  backend.fill(rdweight.view(), 0.0f);
  backend.rms_norm_backward(dy.view(), x.view(), weight.view(), rstd.view(), rows, hidden, rdx.view(),
                            rdweight.view());
  DeviceBuffer rsum = wave(backend, rows * hidden, 2.1f, 0.5f);
  backend.rms_norm_backward(dy.view(), x.view(), weight.view(), rstd.view(), rows, hidden, rsum.view(),
                            rdweight.view(), /*accumulate_dx=*/true);
  const std::vector<float> rg = values_of(backend, rdx), rgot = values_of(backend, rsum);
  for (size_t i = 0; i < rg.size(); ++i) CHECK(rgot[i] == r[i] + rg[i]);
}

TEST_CASE("staged uploads: rounds of ids and floats reach the device, and a round holds what it was begun for", "[model]") {
  CpuBackend backend;
  StagedUploads staging(backend);
  DeviceArray<int64_t> ids(backend, 3);
  DeviceArray<float> values(backend, 2);
  staging.begin(3, 2);
  staging.put(std::vector<int64_t>{7, 8}, ids.view().first(2));
  staging.put(std::vector<int64_t>{9}, ids.view().subspan(2, 1));
  staging.put(std::vector<float>{0.5f, 1.5f}, values.view());
  staging.end();
  std::vector<int64_t> ids_back(3);
  std::vector<float> values_back(2);
  backend.copy_to_host(DeviceSpan<const int64_t>(ids.view()), std::span<int64_t>(ids_back));
  backend.copy_to_host(DeviceSpan<const float>(values.view()), std::span<float>(values_back));
  CHECK(ids_back == std::vector<int64_t>{7, 8, 9});
  CHECK(values_back == std::vector<float>{0.5f, 1.5f});
  // The next round starts over at the staging's beginning, and is held to its own size.
  staging.begin(1, 0);
  staging.put(std::vector<int64_t>{4}, ids.view().first(1));
  CHECK_THROWS_WITH(staging.put(std::vector<int64_t>{5, 6}, ids.view().subspan(1, 2)),
                    Catch::Contains("3 values staged in a round begun for"));
  staging.end();
}

TEST_CASE("grouped linear operations check their groups", "[model]") {
  CpuBackend backend;
  DeviceBuffer x(backend, 3 * 2), y(backend, 3 * 4), w0(backend, 4 * 2), w1(backend, 4 * 2), bias(backend, 4);
  const std::vector<ConstFloatView> ws = {w0.view(), w1.view()};
  const std::vector<int64_t> rows = {3, 0};
  CHECK_THROWS_WITH(backend.grouped_linear_forward(x.view(), ws, {}, std::vector<int64_t>{3}, 2, 4, y.view()),
                    "Backend::grouped_linear_forward: w has 2 views for 1 groups");
  CHECK_THROWS_WITH(backend.grouped_linear_forward(x.view(), ws, std::vector<ConstFloatView>{bias.view()}, rows, 2,
                                                   4, y.view()),
                    "Backend::grouped_linear_forward: bias has 1 views for 2 groups");
  CHECK_THROWS_WITH(backend.grouped_linear_forward(x.view(), ws, {}, std::vector<int64_t>{4, -1}, 2, 4, y.view()),
                    "Backend::grouped_linear_forward: group rows must be >= 0");
  CHECK_THROWS_WITH(backend.grouped_linear_backward_input(y.view(), ws, std::vector<int64_t>{2, 0}, 2, 4, x.view()),
                    "Backend::grouped_linear_backward_input: dy has 12 elements, expected 8");
  const std::vector<FloatView> dw = {w0.view(), y.view()};
  CHECK_THROWS_WITH(backend.grouped_linear_backward_weight(y.view(), x.view(), rows, 2, 4, dw),
                    "Backend::grouped_linear_backward_weight: dw has 12 elements, expected 8");
  // Every group empty: nothing to do, nothing touched.
  backend.grouped_linear_forward({}, ws, {}, std::vector<int64_t>{0, 0}, 2, 4, {});
}
