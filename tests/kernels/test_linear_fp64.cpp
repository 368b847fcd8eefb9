// The router's gating linear layer in fp64 (--moe-router-dtype fp64) keeps what fp32 sums lose:
// 2^24 + 1 - 2^24 is 0 in float arithmetic and 1 in double. On the CPU, and on CUDA device 0
// where one is visible.
#include <catch2/catch.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"

using namespace mgt;

namespace {

std::vector<float> read(Backend& b, ConstFloatView v) {
  std::vector<float> host(static_cast<size_t>(v.size()));
  b.copy_to_host(v, std::span<float>(host));
  return host;
}

DeviceBuffer upload(Backend& b, const std::vector<float>& host) {
  DeviceBuffer d(b, static_cast<int64_t>(host.size()));
  b.copy_from_host(std::span<const float>(host), d.view());
  return d;
}

void check_cancellation(const std::string& device) {
  INFO(device);
  const std::unique_ptr<Backend> owner = make_backend(device);
  Backend& b = *owner;
  constexpr float kBig = 16777216.0f;  // 2^24: adding 1 to it in float gives it back
  // x [3 rows, 3], w [2 outputs, 3]: output 0 sums big + 1 - big, output 1 the same times 2.
  DeviceBuffer x = upload(b, {kBig, 1.0f, -kBig, 1.0f, 1.0f, 1.0f, -kBig, 1.0f, kBig});
  DeviceBuffer w = upload(b, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f});
  DeviceBuffer y(b, 6);
  b.linear_forward_fp64(x.view(), w.view(), 3, 3, 2, y.view());
  CHECK(read(b, y.view()) == std::vector<float>{1.0f, 2.0f, 3.0f, 6.0f, 1.0f, 2.0f});

  // dw[o, i] = Σ_r dy[r, o] · x[r, i]: column 0 of x sums big + 1 - big.
  DeviceBuffer dy = upload(b, {1.0f, 0.5f, 1.0f, 0.5f, 1.0f, 0.5f});
  DeviceBuffer dw = upload(b, std::vector<float>(6, 3.0f));
  DeviceBuffer dx(b, 9);
  b.linear_backward_fp64(dy.view(), x.view(), w.view(), 3, 3, 2, dx.view(), dw.view(), /*accumulate=*/true);
  CHECK(read(b, dw.view()) == std::vector<float>{4.0f, 6.0f, 4.0f, 3.5f, 4.5f, 3.5f});
  CHECK(read(b, dx.view()) == std::vector<float>(9, 2.0f));
  // dx[r, i] = Σ_o dy[r, o] · w[o, i] over 3 outputs of w all ones: row 0 of dy sums big + 1 - big.
  DeviceBuffer dy3 = upload(b, {kBig, 1.0f, -kBig, 1.0f, 2.0f, 3.0f, 0.5f, 0.25f, 0.25f});
  DeviceBuffer w3 = upload(b, std::vector<float>(9, 1.0f));
  DeviceBuffer dw3(b, 9);
  b.linear_backward_fp64(dy3.view(), x.view(), w3.view(), 3, 3, 3, dx.view(), dw3.view(), false);
  CHECK(read(b, dx.view()) == std::vector<float>{1.0f, 1.0f, 1.0f, 6.0f, 6.0f, 6.0f, 1.0f, 1.0f, 1.0f});
}

}  // namespace

TEST_CASE("the fp64 gating linear layer keeps what fp32 sums lose", "[kernels][moe]") {
  check_cancellation("cpu");
  if (cuda::visible_device_count() > 0) check_cancellation("cuda");
}
