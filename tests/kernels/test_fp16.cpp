#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/fp16.hpp"

using namespace mgt;

TEST_CASE("fp16 conversion rounds to nearest even, overflows to infinity and keeps subnormals", "[kernels]") {
  CHECK(float_to_fp16(1.0f) == 0x3c00);
  CHECK(float_to_fp16(-2.0f) == 0xc000);
  CHECK(float_to_fp16(0.0f) == 0x0000);
  CHECK(float_to_fp16(-0.0f) == 0x8000);
  CHECK(float_to_fp16(65504.0f) == 0x7bff);   // the largest finite fp16
  CHECK(float_to_fp16(65519.0f) == 0x7bff);   // below the halfway point to 65536
  CHECK(float_to_fp16(65520.0f) == 0x7c00);   // halfway: to even, which overflows
  CHECK(float_to_fp16(1e10f) == 0x7c00);
  CHECK(float_to_fp16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(float_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie, to even
  CHECK(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie, to even
  CHECK(float_to_fp16(std::ldexp(1.0f, -14)) == 0x0400);             // smallest normal
  CHECK(float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(float_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);             // tie, to even
  CHECK(float_to_fp16(3 * std::ldexp(1.0f, -26)) == 0x0001);
  CHECK(float_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400);  // rounds up into the normals
  const uint16_t nan = float_to_fp16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK(std::isnan(fp16_to_float(nan)));
  CHECK(fp16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(fp16_to_float(0x7bff) == 65504.0f);
  CHECK(std::isinf(fp16_to_float(0x7c00)));
}

TEST_CASE("every finite fp16 value survives a round trip through fp32", "[kernels]") {
  int mismatches = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) continue;  // NaN
    if (float_to_fp16(fp16_to_float(static_cast<uint16_t>(h))) != h) ++mismatches;
  }
  CHECK(mismatches == 0);
}
