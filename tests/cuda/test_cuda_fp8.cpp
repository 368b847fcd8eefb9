// The CUDA backend's FP8 operations against the CPU's beyond the shapes of the operation test
// (tests/kernels/test_backend_operations.cpp): casts over several tiles with ragged edges, on the
// vector and the element-wise paths, with saturating, subnormal, tied, infinite and NaN values;
// the FP8 GEMM on cuBLASLt's shapes and on the fallback's; the delayed-scaling update over
// histories longer than one block's sweep. Codes, amaxes, scales and histories must be equal to
// the bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend_pair.hpp"
#include "kernels/fp8.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr Side kSides[] = {Side::kCpu, Side::kGpu};

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

size_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  size_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += !same_bits(a[i], b[i]);
  return d;
}

template <typename T>
size_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  size_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
  return d;
}

// Magnitudes from 2^-14 to 2^10, random signs: with a scale of 2 they reach both formats'
// subnormals and E4M3's saturation.
std::vector<float> spread_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-14.0f, 10.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = (negative(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
  return v;
}

// With a scale of 2: values halfway between two codes (E4M3: 1.0625 between 1 and 1.125, 3·2^-10
// between the subnormals 2^-9 and 2^-8, 464 beyond 448; E5M2: 1.125, 1.5·2^-16), exactly half
// the smallest subnormal (to zero, either sign), zeros, fp32 subnormals, beyond the formats'
// largest values, and infinities.
const std::vector<float> kEdgeValues = {1.0625f / 2, -1.1875f / 2, 3.0f / 1024 / 2, 464.0f / 2,   1.125f / 2,
                                        -1.375f / 2, 0.75f / 65536, 1.0f / 2048,    -1.0f / 2048, 0.0f,
                                        -0.0f,       1e30f,         -1e30f,         1e-40f,       57344.0f / 2,
                                        61440.0f / 2, kInf,         -kInf};

struct Quantized {
  std::vector<uint8_t> rowwise;
  std::vector<uint8_t> transposed;
  std::vector<float> amax;
  std::vector<float> scale;
  std::vector<float> rowwise_inv;
  std::vector<float> transposed_inv;
};

// fp8_quantize of x on both backends, from a scale of 2 and a recorded amax of 3.
void check_cast(BackendPair& pair, const std::vector<float>& x, FloatType type, int64_t rows, int64_t cols,
                Fp8Format format, bool current, bool rowwise, bool transposed, bool nan_in_x = false) {
  const int64_t n = rows * cols;
  FloatTwin xt = twin(pair, x, type);
  FloatTwin scale = twin(pair, {2.0f}), amax = twin(pair, {3.0f});
  FloatTwin inv_rows = twin(pair, {-1.0f}), inv_cols = twin(pair, {-1.0f});
  Twin<uint8_t> rw = twin(pair, std::vector<uint8_t>(static_cast<size_t>(n)));
  Twin<uint8_t> tr = twin(pair, std::vector<uint8_t>(static_cast<size_t>(n)));
  Quantized q[2];
  for (const Side s : kSides) {
    Backend& b = pair.on(s);
    b.fp8_quantize(xt(s), rows, cols, {scale(s), amax(s), current},
                   rowwise ? Fp8View{rw(s), format, inv_rows(s)} : Fp8View{},
                   transposed ? Fp8View{tr(s), format, inv_cols(s)} : Fp8View{});
    Quantized& out = q[s == Side::kGpu];
    out.rowwise = to_host(b, rw(s));
    out.transposed = to_host(b, tr(s));
    out.amax = to_host(b, amax(s));
    out.scale = to_host(b, scale(s));
    out.rowwise_inv = to_host(b, inv_rows(s));
    out.transposed_inv = to_host(b, inv_cols(s));
  }
  const Quantized& cpu = q[0];
  const Quantized& gpu = q[1];
  CHECK(differing(gpu.rowwise, cpu.rowwise) == 0);
  CHECK(differing(gpu.transposed, cpu.transposed) == 0);
  CHECK(differing_bits(gpu.scale, cpu.scale) == 0);
  CHECK(differing_bits(gpu.rowwise_inv, cpu.rowwise_inv) == 0);
  CHECK(differing_bits(gpu.transposed_inv, cpu.transposed_inv) == 0);
  if (!nan_in_x) {
    CHECK(differing_bits(gpu.amax, cpu.amax) == 0);
  } else {
    // The GPU records a NaN of x in the amax (kernels/cuda/fp8_quantize.hpp); under current
    // scaling so does the CPU.
    CHECK(std::isnan(gpu.amax[0]));
    if (current) CHECK(std::isnan(cpu.amax[0]));
  }
}

}  // namespace

TEST_CASE("cuda fp8: casts equal the CPU's over tiles, edges, ties and special values", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  struct Shape {
    int64_t rows;
    int64_t cols;
  };
  // Several 128×64 tiles with partial ones at both edges: on the general kernel's vector paths
  // (multiples of 8) and off them, and on the cast-transpose kernel's (rows a multiple of 16); a
  // single short row; a shape the rowwise-only cast reshapes to rows of 64; one large enough that
  // the rowwise-only cast's grid-stride loop goes round more than once on an H100.
  const Shape shapes[] = {{200, 264}, {67, 45}, {1, 19}, {130, 96}, {144, 200}, {1104, 8448}};
  uint32_t seed = 7;
  for (const Shape sh : shapes) {
    std::vector<float> x = spread_values(sh.rows * sh.cols, seed++);
    for (size_t i = 0; i < kEdgeValues.size() && i < x.size(); ++i) x[(i * 37) % x.size()] = kEdgeValues[i];
    for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16}) {
      for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
        for (const bool current : {false, true}) {
          for (const int outputs : {1, 2, 3}) {  // rowwise, transposed, both
            const bool rowwise = (outputs & 1) != 0;
            const bool transposed = (outputs & 2) != 0;
            INFO(sh.rows << "×" << sh.cols << " " << float_type_name(type) << " " << fp8_format_name(format)
                         << (current ? " current" : " delayed") << (rowwise ? " rowwise" : "")
                         << (transposed ? " transposed" : ""));
            check_cast(pair, x, type, sh.rows, sh.cols, format, current, rowwise, transposed);
          }
        }
      }
    }
  }
}

TEST_CASE("cuda fp8: a NaN casts to code 0x7F and makes the amax NaN", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  std::vector<float> x = spread_values(96 * 80, 3);
  x[1234] = kNaN;
  x[4321] = -kNaN;
  for (const bool current : {false, true}) {
    INFO((current ? "current" : "delayed") << " scaling");
    check_cast(pair, x, FloatType::kF32, 96, 80, Fp8Format::kE4M3, current, true, true, true);
  }
}

namespace {

std::vector<uint8_t> random_codes(int64_t n, Fp8Format format, uint32_t seed) {
  std::vector<uint8_t> codes;
  for (const float v : spread_values(n, seed)) codes.push_back(fp8_encode(v, format));
  return codes;
}

// fp8_linear on both backends; the relative difference of y.
double fp8_linear_difference(BackendPair& pair, const std::vector<uint8_t>& x, Fp8Format x_format,
                             const std::vector<uint8_t>& w, Fp8Format w_format, bool with_bias, int64_t rows,
                             int64_t in, int64_t out, FloatType type, bool accumulate, Fp8GemmRole role) {
  Twin<uint8_t> xt = twin(pair, x), wt = twin(pair, w);
  FloatTwin sx = twin(pair, {1.0f / 64}), sw = twin(pair, {0.375f});
  FloatTwin bias = twin(pair, with_bias ? spread_values(out, 13) : std::vector<float>{}, type);
  FloatTwin y = twin(pair, spread_values(rows * out, 14), type);
  for (const Side s : kSides) {
    pair.on(s).fp8_linear({xt(s), x_format, sx(s)}, {wt(s), w_format, sw(s)}, bias(s), rows, in, out, y(s),
                          accumulate, role);
  }
  return relative_error(to_host(*pair.cpu, y.cpu.view()), to_host(*pair.gpu, y.gpu.view()));
}

}  // namespace

TEST_CASE("cuda fp8: fp8_linear on cuBLASLt's shapes and on the fallback's", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  struct Shape {
    int64_t rows, in, out;
  };
  // Multiples of 16 (cuBLASLt's FP8 GEMM) and not (the dequantized fp32 product).
  const Shape shapes[] = {{48, 80, 32}, {20, 24, 12}};
  for (const Shape sh : shapes) {
    for (const Fp8Format w_format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
      const std::vector<uint8_t> x = random_codes(sh.rows * sh.in, Fp8Format::kE4M3, 11);
      const std::vector<uint8_t> w = random_codes(sh.out * sh.in, w_format, 12);
      for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16}) {
        // The forward (fast accumulation) and the gradients (split accumulation), written over
        // and accumulating.
        for (const Fp8GemmRole role : {Fp8GemmRole::kForward, Fp8GemmRole::kInputGradient, Fp8GemmRole::kWeightGradient}) {
          for (const bool accumulate : {false, true}) {
            INFO(sh.rows << "×" << sh.in << "×" << sh.out << " w " << fp8_format_name(w_format) << " y "
                         << float_type_name(type) << " role " << static_cast<int>(role)
                         << (accumulate ? " accumulating" : ""));
            // fp32 y: the tensor cores' FP8 accumulator keeps fewer bits than fp32; 2-byte y: a
            // few units of its last place.
            const double bound = type == FloatType::kF32 ? 1e-3 : type == FloatType::kBf16 ? 2e-2 : 4e-3;
            CHECK(fp8_linear_difference(pair, x, Fp8Format::kE4M3, w, w_format, true, sh.rows, sh.in, sh.out, type,
                                        accumulate, role) <= bound);
            CHECK(fp8_linear_difference(pair, x, Fp8Format::kE4M3, w, w_format, false, sh.rows, sh.in, sh.out, type,
                                        accumulate, role) <= bound);
          }
        }
      }
    }
  }
  // E5M2 · E5M2: no FP8 GEMM takes it.
  const std::vector<uint8_t> codes = random_codes(16 * 16, Fp8Format::kE5M2, 15);
  Twin<uint8_t> c = twin(pair, codes);
  FloatTwin s = twin(pair, {1.0f}), y = twin(pair, std::vector<float>(256, 0.0f));
  CHECK_THROWS(pair.gpu->fp8_linear({c.gpu.view(), Fp8Format::kE5M2, s.gpu.view()},
                                    {c.gpu.view(), Fp8Format::kE5M2, s.gpu.view()}, {}, 16, 16, 16, y.gpu.view(),
                                    false, Fp8GemmRole::kInputGradient));
}

TEST_CASE("cuda fp8: the delayed-scaling update equals the CPU's over long histories", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  // 600 rows: three sweeps of a 256-thread block, rolled in place across their boundaries.
  constexpr int64_t tensors = 4, length = 600;
  std::vector<float> history = spread_values(tensors * length, 21);
  for (float& h : history) h = std::fabs(h);
  history[0 * tensors + 1] = 0.0f;    // no amax this step: most_recent keeps the scale
  history[7 * tensors + 2] = kNaN;    // passed over by the max
  history[300 * tensors + 3] = kInf;  // an infinite max: the scale stays
  for (const Fp8AmaxAlgo algo : {Fp8AmaxAlgo::kMax, Fp8AmaxAlgo::kMostRecent}) {
    INFO((algo == Fp8AmaxAlgo::kMax ? "max" : "most_recent"));
    FloatTwin h = twin(pair, history), scale = twin(pair, {1.5f, 2.5f, 3.5f, 4.5f});
    for (const Side s : kSides) {
      pair.on(s).fp8_scaling_update(h(s), scale(s), tensors, length, algo, fp8_scaled_max(Fp8Format::kE4M3, 1));
    }
    CHECK(differing_bits(to_host(*pair.gpu, h.gpu.view()), to_host(*pair.cpu, h.cpu.view())) == 0);
    CHECK(differing_bits(to_host(*pair.gpu, scale.gpu.view()), to_host(*pair.cpu, scale.cpu.view())) == 0);
  }
}

namespace {

// fp8_quantize_gradient of dy (through the GELU whose input was pre, where `gelu`) on the GPU, in
// one pass, against the same GPU's separate steps (gelu_tanh_backward, fp8_quantize,
// bias_backward): codes, dpre, amax and scales to the bit, the bias gradient to fp32 summation
// error; and the fused dpre against the CPU's.
void check_gradient_cast(BackendPair& pair, int64_t rows, int64_t cols, FloatType type, Fp8Format format, bool gelu) {
  const int64_t n = rows * cols;
  Backend& gpu = *pair.gpu;
  const auto buffer = [&](const std::vector<float>& v, FloatType t) {
    DeviceBuffer b(gpu, static_cast<int64_t>(v.size()), t);
    gpu.copy_from_host(v, b.view());
    return b;
  };
  const std::vector<float> dy_values = spread_values(n, 31);
  const std::vector<float> pre_values = kernel_testing::random_floats(static_cast<size_t>(n), 32, -4.0f, 4.0f);
  const std::vector<float> bias_start = kernel_testing::random_floats(static_cast<size_t>(cols), 33, -1.0f, 1.0f);
  struct Result {
    std::vector<uint8_t> rowwise, transposed;
    std::vector<float> dpre, dbias, amax, inv;
  };
  Result r[2];  // fused, separate
  for (const bool fused : {true, false}) {
    DeviceBuffer dy = buffer(dy_values, type), pre = buffer(pre_values, type);
    DeviceBuffer dbias = buffer(bias_start, FloatType::kF32), scale = buffer({0.5f}, FloatType::kF32);
    DeviceBuffer amax = buffer({3.0f}, FloatType::kF32), inv = buffer({-1.0f, -1.0f}, FloatType::kF32);
    DeviceArray<uint8_t> rowwise(gpu, n), transposed(gpu, n);
    const Fp8View rw{rowwise.view(), format, inv.view().subspan(0, 1)};
    const Fp8View tr{transposed.view(), format, inv.view().subspan(1, 1)};
    const Fp8Scaling scaling{scale.view(), amax.view(), false};
    if (fused) {
      gpu.fp8_quantize_gradient(dy.view(), gelu ? ConstFloatView(pre.view()) : ConstFloatView{}, rows, cols, scaling,
                                rw, tr, dbias.view(), gelu ? dy.view() : FloatView{});
    } else {
      if (gelu) gpu.gelu_tanh_backward(dy.view(), pre.view(), dy.view());
      gpu.fp8_quantize(dy.view(), rows, cols, scaling, rw, tr);
      gpu.bias_backward(dy.view(), rows, cols, dbias.view());
    }
    Result& out = r[fused ? 0 : 1];
    out.rowwise = to_host(gpu, rowwise.view());
    out.transposed = to_host(gpu, transposed.view());
    out.dpre = to_host(gpu, dy.view());
    out.dbias = to_host(gpu, dbias.view());
    out.amax = to_host(gpu, amax.view());
    out.inv = to_host(gpu, inv.view());
  }
  CHECK(differing(r[0].rowwise, r[1].rowwise) == 0);
  CHECK(differing(r[0].transposed, r[1].transposed) == 0);
  CHECK(differing_bits(r[0].dpre, r[1].dpre) == 0);
  CHECK(differing_bits(r[0].amax, r[1].amax) == 0);
  CHECK(differing_bits(r[0].inv, r[1].inv) == 0);
  CHECK(relative_error(r[1].dbias, r[0].dbias) <= 1e-5);
  if (gelu) {
    // The GELU's gradient itself against the CPU's (tanhf against std::tanh, then dy's type).
    Backend& cpu = *pair.cpu;
    DeviceBuffer dy(cpu, n, type), pre(cpu, n, type);
    cpu.copy_from_host(dy_values, dy.view());
    cpu.copy_from_host(pre_values, pre.view());
    cpu.gelu_tanh_backward(dy.view(), pre.view(), dy.view());
    CHECK(relative_error(to_host(cpu, dy.view()), r[0].dpre) <= (type == FloatType::kF32 ? 1e-5 : 1e-2));
  }
}

}  // namespace

TEST_CASE("cuda fp8: the gradient cast with the GELU's and the bias's gradients in one pass", "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  struct Shape {
    int64_t rows;
    int64_t cols;
  };
  // Partial tiles at both edges (144 × 200), whole ones, and more rows than one column of
  // blocks covers at once.
  const Shape shapes[] = {{144, 200}, {256, 512}, {1104, 1032}};
  for (const Shape sh : shapes) {
    for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16}) {
      for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
        for (const bool gelu : {false, true}) {
          INFO(sh.rows << "×" << sh.cols << " " << float_type_name(type) << " " << fp8_format_name(format)
                       << (gelu ? " through the GELU" : ""));
          check_gradient_cast(pair, sh.rows, sh.cols, type, format, gelu);
        }
      }
    }
  }
}

TEST_CASE("cuda fp8: the activation cast applies the GELU in one pass", "[cuda][fp8]") {
  // fp8_quantize_gelu_tanh against the same GPU's separate steps (gelu_tanh_forward, fp8_quantize):
  // codes, amax and scale_inv to the bit; partial tiles at both edges, whole ones, rowwise alone.
  if (skip_without_gpu()) return;
  BackendPair pair;
  Backend& gpu = *pair.gpu;
  struct Shape {
    int64_t rows;
    int64_t cols;
  };
  for (const Shape sh : {Shape{144, 200}, Shape{256, 512}, Shape{1104, 1032}}) {
    for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16}) {
      for (const bool both : {true, false}) {
        INFO(sh.rows << "×" << sh.cols << " " << float_type_name(type) << (both ? " both layouts" : " rowwise"));
        const int64_t n = sh.rows * sh.cols;
        const std::vector<float> pre_values = kernel_testing::random_floats(static_cast<size_t>(n), 41, -5.0f, 5.0f);
        DeviceBuffer pre(gpu, n, type);
        gpu.copy_from_host(pre_values, pre.view());
        std::vector<uint8_t> rows_codes[2], column_codes[2];
        std::vector<float> amaxes[2], inverses[2];
        for (const bool fused : {true, false}) {
          DeviceBuffer scale(gpu, 1, FloatType::kF32), amax(gpu, 1, FloatType::kF32), inv(gpu, 2, FloatType::kF32);
          gpu.copy_from_host(std::vector<float>{40.0f}, scale.view());
          gpu.copy_from_host(std::vector<float>{0.25f}, amax.view());
          gpu.copy_from_host(std::vector<float>{-1.0f, -1.0f}, inv.view());
          DeviceArray<uint8_t> rowwise(gpu, n), transposed(gpu, n);
          const Fp8View rw{rowwise.view(), Fp8Format::kE4M3, inv.view().subspan(0, 1)};
          const Fp8View tr = both ? Fp8View{transposed.view(), Fp8Format::kE4M3, inv.view().subspan(1, 1)} : Fp8View{};
          const Fp8Scaling scaling{scale.view(), amax.view(), false};
          if (fused) {
            gpu.fp8_quantize_gelu_tanh(pre.view(), sh.rows, sh.cols, scaling, rw, tr);
          } else {
            DeviceBuffer y(gpu, n, type);
            gpu.gelu_tanh_forward(pre.view(), y.view());
            gpu.fp8_quantize(y.view(), sh.rows, sh.cols, scaling, rw, tr);
          }
          const int k = fused ? 0 : 1;
          rows_codes[k] = to_host(gpu, rowwise.view());
          if (both) column_codes[k] = to_host(gpu, transposed.view());
          amaxes[k] = to_host(gpu, amax.view());
          inverses[k] = to_host(gpu, inv.view());
        }
        CHECK(differing(rows_codes[0], rows_codes[1]) == 0);
        if (both) CHECK(differing(column_codes[0], column_codes[1]) == 0);
        CHECK(differing_bits(amaxes[0], amaxes[1]) == 0);
        CHECK(differing_bits(inverses[0], inverses[1]) == 0);
      }
    }
  }
}

TEST_CASE("cuda fp8: the norm writes its output cast to FP8 in one pass", "[cuda][fp8]") {
  // fp8_norm_forward against the same GPU's separate steps (layer_norm_forward, rms_norm_forward or
  // add_norm_forward into the storage type, then fp8_quantize into both layouts), with the
  // transposed codes made from the rowwise ones by fp8_transpose as the linear layer makes them:
  // codes, amax, scale_inv, the statistics and the sum to the bit. LayerNorm and RMSNorm, with and
  // without the residual add (its third addend once); the few rows of a decode step (one block per
  // row), many rows (a warp per row), and rows that cannot be read eight at a time (composed).
  if (skip_without_gpu()) return;
  BackendPair pair;
  Backend& gpu = *pair.gpu;
  struct Shape {
    int64_t rows;
    int64_t hidden;
  };
  for (const Shape sh : {Shape{48, 768}, Shape{40, 4096}, Shape{304, 1024}, Shape{1040, 2048}, Shape{24, 100}}) {
    for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16}) {
      for (const bool layer_norm : {true, false}) {
        for (const int addends : {1, 2, 3}) {
          const Fp8Format format = addends == 2 ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
          INFO(sh.rows << "×" << sh.hidden << " " << float_type_name(type) << (layer_norm ? " LayerNorm" : " RMSNorm")
                       << " of " << addends << " addend(s), " << fp8_format_name(format));
          const int64_t n = sh.rows * sh.hidden;
          const auto upload = [&](const std::vector<float>& values, FloatType t) {
            DeviceBuffer b(gpu, static_cast<int64_t>(values.size()), t);
            gpu.copy_from_host(values, b.view());
            return b;
          };
          const DeviceBuffer x = upload(kernel_testing::random_floats(static_cast<size_t>(n), 51, -3.0f, 3.0f), type);
          const DeviceBuffer b = upload(kernel_testing::random_floats(static_cast<size_t>(n), 52, -1.0f, 1.0f), type);
          const DeviceBuffer c = upload(kernel_testing::random_floats(static_cast<size_t>(n), 53, -1.0f, 1.0f), type);
          const DeviceBuffer weight =
              upload(kernel_testing::random_floats(static_cast<size_t>(sh.hidden), 54, 0.5f, 1.5f), type);
          const DeviceBuffer bias =
              upload(kernel_testing::random_floats(static_cast<size_t>(sh.hidden), 55, -0.5f, 0.5f), type);
          const ConstFloatView b_in = addends >= 2 ? b.view() : ConstFloatView();
          const ConstFloatView c_in = addends == 3 ? c.view() : ConstFloatView();
          const ConstFloatView bias_in = layer_norm ? bias.view() : ConstFloatView();
          std::vector<uint8_t> rows_codes[2], column_codes[2];
          std::vector<float> amaxes[2], inverses[2], means[2], rstds[2], sums[2];
          for (const bool fused : {true, false}) {
            DeviceBuffer scale(gpu, 1, FloatType::kF32), amax(gpu, 1, FloatType::kF32), inv(gpu, 2, FloatType::kF32);
            gpu.copy_from_host(std::vector<float>{format == Fp8Format::kE4M3 ? 40.0f : 3000.0f}, scale.view());
            gpu.copy_from_host(std::vector<float>{0.25f}, amax.view());
            gpu.copy_from_host(std::vector<float>{-1.0f, -1.0f}, inv.view());
            DeviceBuffer mean(gpu, sh.rows, FloatType::kF32), rstd(gpu, sh.rows, FloatType::kF32);
            DeviceBuffer sum(gpu, n, type);
            const FloatView sum_out = addends >= 2 ? sum.view() : FloatView();
            DeviceArray<uint8_t> rowwise(gpu, n), transposed(gpu, n);
            const Fp8View rw{rowwise.view(), format, inv.view().subspan(0, 1)};
            const Fp8View tr{transposed.view(), format, inv.view().subspan(1, 1)};
            const Fp8Scaling scaling{scale.view(), amax.view(), false};
            const FloatView mean_out = layer_norm ? mean.view() : FloatView();
            if (fused) {
              gpu.fp8_norm_forward(x.view(), b_in, sum_out, weight.view(), bias_in, sh.rows, sh.hidden, 1e-5f,
                                   scaling, rw, mean_out, rstd.view(), c_in);
              gpu.fp8_transpose(rw, sh.rows, sh.hidden, scale.view(), tr);
            } else {
              DeviceBuffer y(gpu, n, type);
              if (addends >= 2) {
                gpu.add_norm_forward(x.view(), b_in, sum_out, weight.view(), bias_in, sh.rows, sh.hidden, 1e-5f,
                                     y.view(), mean_out, rstd.view(), c_in);
              } else if (layer_norm) {
                gpu.layer_norm_forward(x.view(), weight.view(), bias_in, sh.rows, sh.hidden, 1e-5f, y.view(),
                                       mean.view(), rstd.view());
              } else {
                gpu.rms_norm_forward(x.view(), weight.view(), sh.rows, sh.hidden, 1e-5f, y.view(), rstd.view());
              }
              gpu.fp8_quantize(y.view(), sh.rows, sh.hidden, scaling, rw, tr);
            }
            const int k = fused ? 0 : 1;
            rows_codes[k] = to_host(gpu, rowwise.view());
            column_codes[k] = to_host(gpu, transposed.view());
            amaxes[k] = to_host(gpu, amax.view());
            inverses[k] = to_host(gpu, inv.view());
            if (layer_norm) means[k] = to_host(gpu, mean.view());
            rstds[k] = to_host(gpu, rstd.view());
            if (addends >= 2) sums[k] = to_host(gpu, sum.view());
          }
          CHECK(differing(rows_codes[0], rows_codes[1]) == 0);
          CHECK(differing(column_codes[0], column_codes[1]) == 0);
          CHECK(differing_bits(amaxes[0], amaxes[1]) == 0);
          CHECK(differing_bits(inverses[0], inverses[1]) == 0);
          CHECK(differing_bits(means[0], means[1]) == 0);
          CHECK(differing_bits(rstds[0], rstds[1]) == 0);
          CHECK(differing_bits(sums[0], sums[1]) == 0);
        }
      }
    }
  }
}
