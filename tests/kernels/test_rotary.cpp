#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "kernel_testing.hpp"
#include "kernels/cpu/rotary.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

// Straight from the definition: rotate-half on the first rotary_dim channels of each head.
std::vector<double> reference_rope(const std::vector<double>& x, const HeadTensor& t,
                                   const RotaryParams& p) {
  std::vector<double> y = x;
  const int64_t half = p.rotary_dim / 2;
  for (int64_t s = 0; s < t.seq; ++s) {
    for (int64_t b = 0; b < t.batch; ++b) {
      for (int64_t h = 0; h < t.heads; ++h) {
        const int64_t o = t.offset(s, b, h);
        for (int64_t i = 0; i < p.rotary_dim; ++i) {
          const double freq = llama3_scaled_inv_freq(
              std::pow(p.base, -2.0 * static_cast<double>(i % half) / static_cast<double>(p.rotary_dim)),
              p.llama3_scaling_factor);
          const double theta = static_cast<double>(s + p.position_offset) * freq;
          const double rotated = i < half ? -x[o + i + half] : x[o + i - half];
          y[o + i] = x[o + i] * std::cos(theta) + rotated * std::sin(theta);
        }
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE("rotary_dim_for truncates like Megatron", "[kernels]") {
  CHECK(cpu::rotary_dim_for(64, 1.0) == 64);
  CHECK(cpu::rotary_dim_for(64, 0.5) == 32);
  CHECK(cpu::rotary_dim_for(10, 0.25) == 2);
}

TEST_CASE("Llama 3.1 rope scaling keeps, interpolates and slows frequencies as Megatron does", "[kernels]") {
  constexpr double kPi = 3.14159265358979323846;
  // Wavelengths (2π / inv_freq) below 8192/4 keep their frequency; above 8192 it is divided by the
  // factor; between, (1 − s)·f/factor + s·f with s = (8192/wavelength − 1) / 3.
  CHECK(llama3_scaled_inv_freq(0.5, 8.0) == 0.5);
  CHECK(llama3_scaled_inv_freq(2 * kPi / 10000.0, 8.0) == Approx(2 * kPi / 10000.0 / 8.0));
  const double medium = 2 * kPi / 4096.0;  // s = 1/3
  CHECK(llama3_scaled_inv_freq(medium, 8.0) == Approx((2.0 / 3.0) * medium / 8.0 + medium / 3.0));
  CHECK(llama3_scaled_inv_freq(2 * kPi / 10000.0, 0.0) == 2 * kPi / 10000.0);  // no scaling
  // The rotation uses the scaled frequencies, at positions far enough for them to matter.
  const HeadTensor t{4, 1, 2, 16, SeqLayout::kSeqMajor};
  const RotaryParams p{16, 500000.0, 20000, 8.0};
  const auto x = random_floats(static_cast<size_t>(t.elements()), 133, -2.0f, 2.0f);
  std::vector<float> y(x.size());
  cpu::rotary_forward(x.data(), t, p, y.data());
  CHECK(max_rel_error(y, reference_rope(to_double(x), t, p)) < 1e-5);
  RotaryParams unscaled = p;
  unscaled.llama3_scaling_factor = 0.0;
  CHECK(max_rel_error(y, reference_rope(to_double(x), t, unscaled)) > 1e-2);
}

TEST_CASE("rotary forward and backward match fp64 in both layouts", "[kernels]") {
  for (const SeqLayout layout : {SeqLayout::kSeqMajor, SeqLayout::kBatchMajor}) {
    for (const double percent : {1.0, 0.5}) {
      const HeadTensor t{6, 2, 3, 8, layout};
      const RotaryParams p{cpu::rotary_dim_for(8, percent), 10000.0, 3};
      const auto x = random_floats(static_cast<size_t>(t.elements()), 131, -2.0f, 2.0f);
      const auto dy = random_floats(x.size(), 132);
      const auto xd = to_double(x), dyd = to_double(dy);
      INFO("layout " << static_cast<int>(layout) << " rotary_percent " << percent);

      std::vector<float> y(x.size());
      cpu::rotary_forward(x.data(), t, p, y.data());
      const auto want = reference_rope(xd, t, p);
      CHECK(rel_error(y, want) < 1e-6);
      CHECK(max_rel_error(y, want) < 1e-6);
      if (percent < 1.0) {
        // Channels past rotary_dim pass through untouched.
        for (int64_t s = 0; s < t.seq; ++s) {
          for (int64_t i = p.rotary_dim; i < t.head_dim; ++i) {
            const auto at = static_cast<size_t>(t.offset(s, 1, 2) + i);
            CHECK(y[at] == x[at]);
          }
        }
      }

      std::vector<float> dx(x.size());
      cpu::rotary_backward(dy.data(), t, p, dx.data());
      const auto want_dx = numeric_gradient(
          [&](const std::vector<double>& v) { return dot(reference_rope(v, t, p), dyd); }, xd);
      CHECK(rel_error(dx, want_dx) < 1e-6);

      // In place, as the model applies it to q and k.
      auto inplace = x;
      cpu::rotary_forward(inplace.data(), t, p, inplace.data());
      CHECK(inplace == y);
    }
  }
}

TEST_CASE("rotary refuses an odd or oversized rotary_dim", "[kernels]") {
  const HeadTensor t{2, 1, 1, 6, SeqLayout::kSeqMajor};
  std::vector<float> x(12, 1.0f);
  CHECK_THROWS_AS(cpu::rotary_forward(x.data(), t, {3, 10000.0, 0}, x.data()), Error);
  CHECK_THROWS_AS(cpu::rotary_forward(x.data(), t, {8, 10000.0, 0}, x.data()), Error);
}
