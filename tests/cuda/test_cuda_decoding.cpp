// The decode step's GPU paths against the CPU: cached attention reading the cache's length on the
// device, the small-rows linear layer, and recorded operations (a CUDA graph) replayed.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "backend_pair.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;

namespace {

constexpr Side kSides[] = {Side::kCpu, Side::kGpu};

}  // namespace

TEST_CASE("cuda ops: cached attention at a length read on the device (GQA, rotary, fp32 and bf16)", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const int64_t batch = 2, heads = 4, groups = 2;
  // 64 and 128: the 16-byte vector kernel; 80 the other. 261 cached: several rounds of its keys.
  for (const auto& [capacity, length] : {std::pair<int64_t, int64_t>{48, 37}, {300, 261}})
  for (const FloatType type : {FloatType::kF32, FloatType::kBf16}) {
    for (const int64_t head_dim : {64, 80, 128}) {
      for (const bool rope : {false, true}) {
        for (const int64_t seq_q : {1, 3}) {
          const AttentionShape shape{batch, seq_q, capacity, heads, groups, head_dim, SeqLayout::kSeqMajor};
          const int64_t fresh = seq_q * batch * groups * head_dim;
          const auto seed = static_cast<uint32_t>(head_dim + 7 * seq_q + (rope ? 100 : 0));
          auto q = random_twin(pair, shape.query().elements(), seed, -1.0f, 1.0f, type);
          auto k = random_twin(pair, fresh, seed + 1, -1.0f, 1.0f, type);
          auto v = random_twin(pair, fresh, seed + 2, -1.0f, 1.0f, type);
          // Every position holds values: the earlier ones stand for cached tokens.
          auto key_cache = random_twin(pair, shape.key_value().elements(), seed + 3, -1.0f, 1.0f, type);
          auto value_cache = random_twin(pair, shape.key_value().elements(), seed + 4, -1.0f, 1.0f, type);
          auto out = random_twin(pair, shape.query().elements(), seed + 5, -1.0f, 1.0f, type);
          auto cached = twin<int64_t>(pair, {length});
          RotaryParams rotary;
          rotary.rotary_dim = head_dim / 2;
          rotary.base = 10000.0;
          for (Side s : kSides)
            pair.on(s).cached_attention(q(s), k(s), v(s), key_cache(s), value_cache(s), cached(s), shape,
                                        rope ? &rotary : nullptr, 0.125f, out(s));
          const bool fp32 = type == FloatType::kF32;
          INFO((fp32 ? "fp32" : "bf16") << " head_dim " << head_dim << (rope ? " rotary" : "") << " seq_q " << seq_q
                                        << " length " << length);
          // bf16 outputs are rounded from fp32 sums taken in another order.
          check_close(pair, out, fp32 ? 1e-5 : 1e-2, "cached attention output");
          check_close(pair, key_cache, fp32 ? 1e-6 : 1e-2, "keys stored at the length");
          check_close(pair, value_cache, 0.0, "values stored at the length");
          check_close(pair, q, fp32 ? 1e-6 : 1e-2, "queries rotated in place");
        }
      }
    }
  }
}

TEST_CASE("cuda ops: linear layers of a few rows (decoding), fp32 and bf16", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  for (const FloatType type : {FloatType::kF32, FloatType::kBf16}) {
    for (const auto& [rows, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 768, 2304},
                                        {3, 136, 50}, {8, 1024, 257}, {9, 64, 96}, {2, 60, 33}}) {
      auto x = random_twin(pair, rows * in, 201, -1.0f, 1.0f, type);
      auto w = random_twin(pair, out * in, 202, -0.1f, 0.1f, type);
      auto bias = random_twin(pair, out, 203, -0.5f, 0.5f, type);
      auto y = random_twin(pair, rows * out, 204, -1.0f, 1.0f, type);
      auto pre = random_twin(pair, rows * out, 205, -1.0f, 1.0f, type);
      auto act = random_twin(pair, rows * out, 206, -1.0f, 1.0f, type);
      for (Side s : kSides) {
        pair.on(s).linear_forward(x(s), w(s), bias(s), rows, in, out, y(s));
        pair.on(s).linear_gelu_tanh_forward(x(s), w(s), bias(s), rows, in, out, pre(s), act(s));
      }
      const bool fp32 = type == FloatType::kF32;
      INFO((fp32 ? "fp32" : "bf16") << " rows " << rows << " in " << in << " out " << out);
      check_close(pair, y, fp32 ? 1e-5 : 1e-2, "linear_forward");
      check_close(pair, pre, fp32 ? 1e-5 : 1e-2, "linear_gelu_tanh_forward, pre-activation");
      check_close(pair, act, fp32 ? 1e-5 : 1e-2, "linear_gelu_tanh_forward, GELU");
    }
  }
}

TEST_CASE("cuda backend: recorded operations replay, reads and allocations are not recorded", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  Backend& gpu = *pair.gpu;
  DeviceBuffer x(gpu, 1000);
  gpu.fill(x.view(), 1.0f);
  const auto value = [&] { return to_host(gpu, x.view())[999]; };
  std::unique_ptr<RecordedOperations> doubling = gpu.record([&] {
    gpu.scale(x.view(), 3.0f);
    gpu.add(x.view(), x.view(), x.view());
  });
  REQUIRE(doubling != nullptr);
  CHECK(value() == 6.0f);  // recording runs the operations once
  doubling->replay();
  doubling->replay();
  CHECK(value() == 216.0f);

  // Neither records; neither runs any of its operations.
  CHECK(gpu.record([&] {
    gpu.scale(x.view(), 2.0f);
    DeviceBuffer scratch(gpu, 10);
  }) == nullptr);
  CHECK(gpu.record([&] {
    gpu.scale(x.view(), 2.0f);
    (void)to_host(gpu, x.view());
  }) == nullptr);
  CHECK(value() == 216.0f);
  gpu.scale(x.view(), 0.5f);  // the backend works on after a failed recording
  CHECK(value() == 108.0f);
  CHECK(pair.cpu->record([] {}) == nullptr);
}

TEST_CASE("cuda backend: asynchronous copies to and from page-locked memory, ordered by queue events", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  for (Side s : kSides) {
    Backend& be = pair.on(s);
    PinnedHostArray<int64_t> staging(be, 1000);
    PinnedHostArray<int64_t> landing(be, 1000);
    DeviceIndexBuffer device(be, 1000);
    for (int round = 0; round < 3; ++round) {
      for (int64_t i = 0; i < 1000; ++i) staging.host()[static_cast<size_t>(i)] = 7 * i + round;
      be.copy_from_host_async<int64_t>(staging.host(), device.view());
      be.record_event()->wait();  // the staging may be rewritten from here on
      const std::vector<int64_t> back = to_host(be, device.view());
      CHECK(back[999] == 7 * 999 + round);
      CHECK(back[0] == round);
      // Both ways queued back to back: the copy back sees the copy in, and the host sees both once
      // the event after them has been waited for.
      for (int64_t i = 0; i < 1000; ++i) staging.host()[static_cast<size_t>(i)] = 5 * i - round;
      be.copy_from_host_async<int64_t>(staging.host(), device.view());
      be.copy_to_host_async(DeviceSpan<const int64_t>(device.view()), landing.host());
      be.record_event()->wait();
      CHECK(landing.host()[0] == -round);
      CHECK(landing.host()[999] == 5 * 999 - round);
    }
  }
  // Timed events: the device time of the operations between them, at least a fill's.
  {
    const std::unique_ptr<QueueEvent> before = pair.gpu->record_timed_event();
    DeviceBuffer big(*pair.gpu, int64_t{1} << 26);
    for (int i = 0; i < 4; ++i) pair.gpu->fill(big.view(), 1.0f + static_cast<float>(i));
    const std::unique_ptr<QueueEvent> after = pair.gpu->record_timed_event();
    const double seconds = after->seconds_since(*before);
    CHECK(seconds > 0.0);
    CHECK(seconds < 10.0);
  }
  // Pageable memory could still be read (or written) after the call returned: the GPU refuses it.
  std::vector<int64_t> pageable(10, 1);
  DeviceIndexBuffer device(*pair.gpu, 10);
  CHECK_THROWS_WITH(pair.gpu->copy_from_host_async<int64_t>(pageable, device.view()), Catch::Contains("page-locked"));
  CHECK_THROWS_WITH(pair.gpu->copy_to_host_async(DeviceSpan<const int64_t>(device.view()), std::span<int64_t>(pageable)),
                    Catch::Contains("page-locked"));
}
