// The grouped GEMM kernel on Hopper (kernels/cuda/grouped_gemm_hopper.cu) through the grouped
// linear layer's three GEMMs, against the CPU backend's linear layer group by group, on random
// bf16 inputs: groups of no rows, one row and rows across several 128-row tiles, sizes that end
// inside a tile and a 64-wide k block, and more groups than one launch takes.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "backend_pair.hpp"
#include "kernels/cuda/grouped_gemm_hopper.hpp"
#include "kernels/cuda/grouped_linear_hopper.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;

namespace {

bool hopper_gpu() {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

std::vector<ConstFloatView> const_views(std::vector<FloatTwin>& ts, Side s) {
  std::vector<ConstFloatView> v;
  for (FloatTwin& t : ts) v.push_back(t(s));
  return v;
}

std::vector<FloatView> views(std::vector<FloatTwin>& ts, Side s) {
  std::vector<FloatView> v;
  for (FloatTwin& t : ts) v.push_back(t(s));
  return v;
}

}  // namespace

TEST_CASE("cuda grouped GEMM on Hopper: forward, input and weight gradients against the CPU", "[cuda][moe]") {
  if (skip_without_gpu()) return;
  if (!hopper_gpu()) {
    CHECK_FALSE(cuda::grouped_gemm_hopper_available());
    testing::skip_test("not a compute capability 9.0 GPU: the kernel is sm_90a code");
    return;
  }
  REQUIRE(cuda::grouped_gemm_hopper_available());
  using Case = std::tuple<std::vector<int64_t>, int64_t, int64_t>;
  for (const auto& [rows, in, out] : {Case{{0, 1, 77, 128, 300, 1000}, 200, 264}, Case{{129, 5, 0, 64}, 64, 520},
                                      Case{std::vector<int64_t>(40, 33), 72, 96}}) {
    BackendPair pair;
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    const auto bf16 = FloatType::kBf16;
    FloatTwin x = random_twin(pair, total * in, 1, -1, 1, bf16), dy = random_twin(pair, total * out, 2, -1, 1, bf16);
    FloatTwin y = random_twin(pair, total * out, 3, -1, 1, bf16), dx = random_twin(pair, total * in, 4, -1, 1, bf16);
    std::vector<FloatTwin> w, main_grad, written;
    for (std::size_t g = 0; g < rows.size(); ++g) {
      w.push_back(random_twin(pair, out * in, 10 + g, -1, 1, bf16));
      main_grad.push_back(random_twin(pair, out * in, 100 + g));
      written.push_back(random_twin(pair, out * in, 200 + g));
    }
    // The CPU: one linear layer per group (written: zero for a group of no rows).
    int64_t r0 = 0;
    for (std::size_t g = 0; g < rows.size(); ++g) {
      const int64_t r = rows[g];
      Backend& cpu = *pair.cpu;
      cpu.fill(written[g](Side::kCpu), 0.0f);
      if (r > 0) {
        cpu.linear_forward(x(Side::kCpu).subspan(r0 * in, r * in), w[g](Side::kCpu), {}, r, in, out,
                           y(Side::kCpu).subspan(r0 * out, r * out));
        cpu.linear_backward_input(dy(Side::kCpu).subspan(r0 * out, r * out), w[g](Side::kCpu), r, in, out,
                                  dx(Side::kCpu).subspan(r0 * in, r * in));
        cpu.linear_backward_weight(dy(Side::kCpu).subspan(r0 * out, r * out), x(Side::kCpu).subspan(r0 * in, r * in),
                                   r, in, out, main_grad[g](Side::kCpu));
        cpu.linear_backward_weight(dy(Side::kCpu).subspan(r0 * out, r * out), x(Side::kCpu).subspan(r0 * in, r * in),
                                   r, in, out, written[g](Side::kCpu));
      }
      r0 += r;
    }
    // The GPU: the kernel itself (a refusal would fail the test, not fall back).
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const Side gpu = Side::kGpu;
    CHECK(cuda::grouped_linear_forward_hopper(x(gpu), const_views(w, gpu), rows, in, out, y(gpu), nullptr));
    CHECK(cuda::grouped_linear_backward_input_hopper(dy(gpu), const_views(w, gpu), rows, in, out, dx(gpu), nullptr));
    CHECK(cuda::grouped_linear_backward_weight_hopper(dy(gpu), x(gpu), rows, in, out, views(main_grad, gpu), true,
                                                      nullptr));
    CHECK(cuda::grouped_linear_backward_weight_hopper(dy(gpu), x(gpu), rows, in, out, views(written, gpu), false,
                                                      nullptr));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    INFO(rows.size() << " groups, in " << in << ", out " << out);
    // bf16 outputs: one rounding of the same fp32 sums; fp32 gradients: fp32 sums in another order.
    check_close(pair, y, 8e-3, "forward");
    check_close(pair, dx, 8e-3, "input gradient");
    for (std::size_t g = 0; g < rows.size(); ++g) {
      check_close(pair, main_grad[g], 1e-5, "weight gradient added to the main gradient");
      if (rows[g] > 0) check_close(pair, written[g], 1e-5, "weight gradient written");
      else CHECK(to_host(*pair.gpu, written[g](gpu)) == std::vector<float>(static_cast<std::size_t>(out * in), 0.0f));
    }
  }
}

TEST_CASE("cuda grouped GEMM on Hopper: what the kernel leaves to a GEMM per group", "[cuda][moe]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const std::vector<int64_t> rows = {3, 5};
  FloatTwin x = random_twin(pair, 8 * 36, 1, -1, 1, FloatType::kBf16);
  FloatTwin dy = random_twin(pair, 8 * 16, 2, -1, 1, FloatType::kBf16);
  std::vector<FloatTwin> w, dw_bf16, dw;
  for (int g = 0; g < 2; ++g) {
    w.push_back(random_twin(pair, 16 * 36, 3 + g, -1, 1, FloatType::kBf16));
    dw_bf16.push_back(random_twin(pair, 16 * 32, 5 + g, -1, 1, FloatType::kBf16));
    dw.push_back(random_twin(pair, 16 * 32, 7 + g));
  }
  FloatTwin y = random_twin(pair, 8 * 16, 9, -1, 1, FloatType::kBf16);
  const Side gpu = Side::kGpu;
  // Rows of 36 bf16 (72 bytes): not whole 16-byte units, which TMA reads.
  CHECK_FALSE(cuda::grouped_linear_forward_hopper(x(gpu), const_views(w, gpu), rows, 36, 16, y(gpu), nullptr));
  // A bf16 gradient added to: TMA's bf16 reduction would round the sum twice.
  FloatTwin x32 = random_twin(pair, 8 * 32, 10, -1, 1, FloatType::kBf16);
  CHECK_FALSE(cuda::grouped_linear_backward_weight_hopper(dy(gpu), x32(gpu), rows, 32, 16, views(dw_bf16, gpu), true,
                                                          nullptr));
  // fp32 operands.
  FloatTwin x_f32 = random_twin(pair, 8 * 32, 11);
  CHECK_FALSE(cuda::grouped_linear_backward_weight_hopper(dy(gpu), x_f32(gpu), rows, 32, 16, views(dw, gpu), true,
                                                          nullptr));
}
