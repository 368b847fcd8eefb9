// The FP8 formats and Transformer Engine's scaling formulas (kernels/fp8.hpp): every code of both
// formats, rounding ties, saturation, and the delayed- and current-scaling updates worked by hand.
// Where the CUDA toolkit is present its host conversions (cuda_fp8.h, the hardware's
// cvt.rn.satfinite semantics) are a second reference for every bf16 value.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/fp8.hpp"

#if defined(MGT_HAVE_CUDA) && __has_include(<cuda_fp8.h>)
#include <cuda_fp8.h>
#define MGT_TEST_WITH_CUDA_FP8 1
#endif

using namespace mgt;

namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};

bool finite_code(uint8_t code, Fp8Format format) { return std::isfinite(fp8_decode(code, format)); }

}  // namespace

TEST_CASE("fp8: known codes of both formats", "[kernels][fp8]") {
  CHECK(fp8_decode(0x38, Fp8Format::kE4M3) == 1.0f);
  CHECK(fp8_decode(0x7e, Fp8Format::kE4M3) == 448.0f);
  CHECK(fp8_decode(0xfe, Fp8Format::kE4M3) == -448.0f);
  CHECK(fp8_decode(0x08, Fp8Format::kE4M3) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(fp8_decode(0x01, Fp8Format::kE4M3) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(fp8_decode(0x07, Fp8Format::kE4M3) == 7 * std::ldexp(1.0f, -9));
  CHECK(std::isnan(fp8_decode(0x7f, Fp8Format::kE4M3)));
  CHECK(std::isnan(fp8_decode(0xff, Fp8Format::kE4M3)));
  CHECK(fp8_decode(0x78, Fp8Format::kE4M3) == 256.0f);  // E4M3 has no infinity: S.1111.000 is finite
  CHECK(fp8_decode(0x3c, Fp8Format::kE5M2) == 1.0f);
  CHECK(fp8_decode(0x7b, Fp8Format::kE5M2) == 57344.0f);
  CHECK(fp8_decode(0x04, Fp8Format::kE5M2) == std::ldexp(1.0f, -14));
  CHECK(fp8_decode(0x01, Fp8Format::kE5M2) == std::ldexp(1.0f, -16));
  CHECK(fp8_decode(0x7c, Fp8Format::kE5M2) == std::numeric_limits<float>::infinity());
  CHECK(fp8_decode(0xfc, Fp8Format::kE5M2) == -std::numeric_limits<float>::infinity());
  for (const uint8_t nan : {0x7d, 0x7e, 0x7f}) CHECK(std::isnan(fp8_decode(nan, Fp8Format::kE5M2)));
  CHECK(fp8_max(Fp8Format::kE4M3) == 448.0f);
  CHECK(fp8_max(Fp8Format::kE5M2) == 57344.0f);
}

TEST_CASE("fp8: all 256 codes decode monotonically and encode back to themselves", "[kernels][fp8]") {
  for (const Fp8Format format : kFormats) {
    INFO(fp8_format_name(format));
    int finite = 0;
    for (int code = 0; code < 256; ++code) {
      const auto c = static_cast<uint8_t>(code);
      if (!finite_code(c, format)) continue;
      ++finite;
      const float v = fp8_decode(c, format);
      INFO("code " << code << " value " << v);
      CHECK(fp8_encode(v, format) == c);
      // Sign-magnitude: the negative code is the same magnitude.
      CHECK(fp8_decode(static_cast<uint8_t>(c ^ 0x80), format) == -v);
      if ((code & 0x7f) > 0 && finite_code(static_cast<uint8_t>(c - 1), format))
        CHECK(std::fabs(fp8_decode(static_cast<uint8_t>(c - 1), format)) < std::fabs(v));
    }
    CHECK(finite == (format == Fp8Format::kE4M3 ? 254 : 248));
  }
}

TEST_CASE("fp8: rounding to nearest, ties to the even code, saturation and specials", "[kernels][fp8]") {
  for (const Fp8Format format : kFormats) {
    INFO(fp8_format_name(format));
    const int largest = format == Fp8Format::kE4M3 ? 0x7e : 0x7b;
    for (int code = 0; code < largest; ++code) {
      const double lo = fp8_decode(static_cast<uint8_t>(code), format);
      const double hi = fp8_decode(static_cast<uint8_t>(code + 1), format);
      const auto mid = static_cast<float>((lo + hi) / 2);  // exact: fp8 values have few bits
      INFO("between codes " << code << " and " << code + 1);
      const int even = code % 2 == 0 ? code : code + 1;
      CHECK(fp8_encode(mid, format) == even);
      CHECK(fp8_encode(-mid, format) == (0x80 | even));
      CHECK(fp8_encode(std::nextafter(mid, 0.0f), format) == code);
      CHECK(fp8_encode(std::nextafter(mid, 1e9f), format) == code + 1);
    }
    const float max = fp8_max(format);
    CHECK(fp8_encode(max * 1.01f, format) == largest);
    CHECK(fp8_encode(-1e30f, format) == (0x80 | largest));
    CHECK(fp8_encode(std::numeric_limits<float>::infinity(), format) == largest);
    CHECK(fp8_encode(-std::numeric_limits<float>::infinity(), format) == (0x80 | largest));
    CHECK(fp8_encode(std::numeric_limits<float>::quiet_NaN(), format) == 0x7f);
    const float smallest = fp8_decode(1, format);
    CHECK(fp8_encode(smallest / 2, format) == 0x00);        // a tie with zero: the even code
    CHECK(fp8_encode(-smallest / 2, format) == 0x80);       // keeps its sign
    CHECK(fp8_encode(std::nextafter(smallest / 2, 1.0f), format) == 0x01);
    CHECK(fp8_encode(0.0f, format) == 0x00);
    CHECK(fp8_encode(-0.0f, format) == 0x80);
  }
}

#ifdef MGT_TEST_WITH_CUDA_FP8
TEST_CASE("fp8: every bf16 value and its neighbours encode as the CUDA toolkit's conversion does", "[kernels][fp8]") {
  for (const Fp8Format format : kFormats) {
    const auto kind = format == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
    int differ = 0;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float x = bf16_to_float(static_cast<uint16_t>(bits));
      if (std::isnan(x)) continue;
      for (const float v : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
        differ += fp8_encode(v, format) != __nv_cvt_float_to_fp8(v, __NV_SATFINITE, kind);
      }
    }
    INFO(fp8_format_name(format));
    CHECK(differ == 0);
  }
}
#endif

TEST_CASE("fp8: delayed scaling rolls the history and scales by Transformer Engine's formula", "[kernels][fp8]") {
  // Two tensors, a history of three: rows [newest, older, oldest] as TE keeps them after a roll.
  std::vector<float> history = {4.0f, 0.0f,    // row 0: the amaxes since the last update
                                2.0f, 0.0f,    // row 1
                                8.0f, 0.0f};   // row 2
  std::vector<float> scale = {1.0f, 0.5f};
  const float scaled_max = fp8_scaled_max(Fp8Format::kE4M3, 1);  // 448 / 2
  CHECK(scaled_max == 224.0f);
  SECTION("max of the history") {
    fp8_delayed_scaling_update(history, scale, 2, 3, Fp8AmaxAlgo::kMax, scaled_max);
    CHECK(scale[0] == 224.0f / 8.0f);
    CHECK(scale[1] == 0.5f);  // no amax yet: the scale stays
    CHECK(history == std::vector<float>{0.0f, 0.0f, 8.0f, 0.0f, 4.0f, 0.0f});
  }
  SECTION("most recent") {
    fp8_delayed_scaling_update(history, scale, 2, 3, Fp8AmaxAlgo::kMostRecent, scaled_max);
    CHECK(scale[0] == 224.0f / 4.0f);
    CHECK(scale[1] == 0.5f);
  }
  SECTION("a non-finite amax keeps the scale") {
    history[0] = std::numeric_limits<float>::infinity();
    fp8_delayed_scaling_update(history, scale, 2, 3, Fp8AmaxAlgo::kMostRecent, scaled_max);
    CHECK(scale[0] == 1.0f);
  }
  SECTION("a history of one") {
    std::vector<float> one = {3.0f};
    std::vector<float> s = {1.0f};
    fp8_delayed_scaling_update(one, s, 1, 1, Fp8AmaxAlgo::kMax, fp8_scaled_max(Fp8Format::kE5M2, 0));
    CHECK(s[0] == 57344.0f / 3.0f);
    CHECK(one[0] == 0.0f);
  }
}

TEST_CASE("fp8: current scaling takes the tensor's own amax", "[kernels][fp8]") {
  CHECK(fp8_current_scale(2.0f, Fp8Format::kE4M3) == 224.0f);
  CHECK(fp8_current_scale(0.0f, Fp8Format::kE4M3) == 1.0f);
  CHECK(fp8_current_scale(std::numeric_limits<float>::infinity(), Fp8Format::kE5M2) == 1.0f);
  CHECK(fp8_current_scale(std::numeric_limits<float>::quiet_NaN(), Fp8Format::kE5M2) == 1.0f);
  CHECK(fp8_current_scale(1e-40f, Fp8Format::kE5M2) == std::numeric_limits<float>::max());
}
