// The grouped GEMM kernel on Hopper (kernels/cuda/grouped_gemm_hopper.cu) through the grouped
// linear layer's three GEMMs, against the CPU backend's linear layer group by group, on random
// bf16 inputs, and through the FP8 linear layer's three GEMMs against the CPU's emulation of
// fp8_linear on random codes: groups of no rows, one row and rows across several 128-row tiles,
// sizes that end inside a tile and a k block, and more groups than one launch takes.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "backend_pair.hpp"
#include "kernels/fp8.hpp"
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

// Codes of random values of magnitude up to `magnitude` (a scaled tensor's range), never zero.
std::vector<uint8_t> random_codes(int64_t n, Fp8Format format, float magnitude, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> size(0.1f * magnitude, magnitude);
  std::bernoulli_distribution negative(0.5);
  std::vector<uint8_t> codes;
  for (int64_t i = 0; i < n; ++i) codes.push_back(fp8_encode((negative(rng) ? -1.0f : 1.0f) * size(rng), format));
  return codes;
}

// One FP8 GEMM per group, its operands on both sides.
struct Fp8Gemm {
  Twin<uint8_t> x, w;
  FloatTwin sx, sw, y;
  Fp8Format x_format;
  int64_t rows, in, out;
  Fp8LinearGroup on(Side s) {
    return {{x(s).first(rows * in), x_format, sx(s)}, {w(s).first(out * in), Fp8Format::kE4M3, sw(s)}, rows, in, out,
            y(s).first(rows * out)};
  }
};

}  // namespace

TEST_CASE("cuda grouped GEMM on Hopper: the FP8 linear layer's GEMMs against the CPU's emulation", "[cuda][moe][fp8]") {
  if (skip_without_gpu()) return;
  if (!hopper_gpu()) {
    testing::skip_test("not a compute capability 9.0 GPU: the kernel is sm_90a code");
    return;
  }
  struct Role {
    Fp8GemmRole role;
    Fp8Format x_format;
    FloatType y_type;
    bool accumulate;
  };
  // The forward (E4M3, fast accumulation, into bf16), the input gradient (E5M2, into bf16) and
  // the weight gradient (E5M2, added to fp32 and written over it), each over groups of rows as
  // experts receive them (the weight gradient's k: multiples of 16, as the layer pads them).
  using Case = std::tuple<std::vector<int64_t>, int64_t, int64_t>;
  for (const Role role : {Role{Fp8GemmRole::kForward, Fp8Format::kE4M3, FloatType::kBf16, false},
                          Role{Fp8GemmRole::kInputGradient, Fp8Format::kE5M2, FloatType::kBf16, false},
                          Role{Fp8GemmRole::kWeightGradient, Fp8Format::kE5M2, FloatType::kF32, true},
                          Role{Fp8GemmRole::kWeightGradient, Fp8Format::kE5M2, FloatType::kF32, false}}) {
    const bool weight = role.role == Fp8GemmRole::kWeightGradient;
    for (const auto& [rows, in, out] : {Case{{0, 16, 80, 128, 304, 1008}, 208, 272}, Case{{144, 16, 0, 64}, 64, 528},
                                        Case{std::vector<int64_t>(40, 48), 80, 96}, Case{{1, 77, 300}, 160, 144}}) {
      if (weight && rows.front() == 1) continue;  // rows not whole 16-byte units: cuBLASLt's then
      BackendPair pair;
      std::vector<Fp8Gemm> gemms;
      uint32_t seed = 1;
      for (const int64_t r : rows) {
        // The weight gradient's GEMM: [out, r] codes times [in, r] codes into [out, in].
        const int64_t m = weight ? out : r, k = weight ? r : in, n = weight ? in : out;
        const float x_range = role.x_format == Fp8Format::kE5M2 ? 3000.0f : 300.0f;
        const auto at_least_one = [](int64_t v) { return std::max<int64_t>(v, 1); };  // buffers of empty groups
        gemms.push_back({twin(pair, random_codes(at_least_one(m * k), role.x_format, x_range, seed++)),
                         twin(pair, random_codes(at_least_one(n * k), Fp8Format::kE4M3, 300.0f, seed++)),
                         twin(pair, {0.0078125f}), twin(pair, {0.003f}),
                         random_twin(pair, at_least_one(m * n), seed++, -1, 1, role.y_type), role.x_format, m, k, n});
      }
      std::vector<Fp8LinearGroup> cpu, gpu;
      for (Fp8Gemm& g : gemms) {
        cpu.push_back(g.on(Side::kCpu));
        gpu.push_back(g.on(Side::kGpu));
      }
      pair.cpu->grouped_fp8_linear(cpu, role.accumulate, role.role);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      // The kernel itself (a refusal would fail the test, not fall back); groups of no k as the
      // backend's wrapper leaves them to the kernel: none.
      std::vector<Fp8LinearGroup> with_k;
      for (std::size_t g = 0; g < gpu.size(); ++g) {
        if (gpu[g].in > 0) with_k.push_back(gpu[g]);
        else if (!role.accumulate) pair.gpu->fill(gpu[g].y, 0.0f);
      }
      CHECK(cuda::grouped_fp8_linear_hopper(with_k, role.accumulate, role.role, nullptr));
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      INFO(rows.size() << " groups, in " << in << ", out " << out << ", role " << static_cast<int>(role.role)
                       << (role.accumulate ? " accumulating" : ""));
      // fp32: the same products summed in another order (the forward's fast accumulation keeps
      // fewer bits); bf16: one rounding of nearly the same sums.
      const double bound = role.y_type == FloatType::kF32 ? 1e-4 : role.role == Fp8GemmRole::kForward ? 2e-2 : 8e-3;
      for (Fp8Gemm& g : gemms) {
        if (g.in > 0 || role.accumulate) {
          check_close(pair, g.y, bound, "y");
        } else {  // a weight gradient over no rows, written over: zero
          CHECK(to_host(*pair.gpu, g.y.gpu.view()) == std::vector<float>(static_cast<std::size_t>(g.y.size()), 0.0f));
        }
      }
    }
  }
}

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
