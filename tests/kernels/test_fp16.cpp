#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp16.hpp"

using namespace mgt;

TEST_CASE("fp16 conversion rounds to nearest even, overflows to infinity and keeps subnormals", "[kernels]") {
  CHECK(cpu::float_to_fp16(1.0f) == 0x3c00);
  CHECK(cpu::float_to_fp16(-2.0f) == 0xc000);
  CHECK(cpu::float_to_fp16(0.0f) == 0x0000);
  CHECK(cpu::float_to_fp16(-0.0f) == 0x8000);
  CHECK(cpu::float_to_fp16(65504.0f) == 0x7bff);   // the largest finite fp16
  CHECK(cpu::float_to_fp16(65519.0f) == 0x7bff);   // below the halfway point to 65536
  CHECK(cpu::float_to_fp16(65520.0f) == 0x7c00);   // halfway: to even, which overflows
  CHECK(cpu::float_to_fp16(1e10f) == 0x7c00);
  CHECK(cpu::float_to_fp16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(cpu::float_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie, to even
  CHECK(cpu::float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie, to even
  CHECK(cpu::float_to_fp16(std::ldexp(1.0f, -14)) == 0x0400);             // smallest normal
  CHECK(cpu::float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(cpu::float_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);             // tie, to even
  CHECK(cpu::float_to_fp16(3 * std::ldexp(1.0f, -26)) == 0x0001);
  CHECK(cpu::float_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400);  // rounds up into the normals
  const uint16_t nan = cpu::float_to_fp16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK(std::isnan(cpu::fp16_to_float(nan)));
  CHECK(cpu::fp16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(cpu::fp16_to_float(0x7bff) == 65504.0f);
  CHECK(std::isinf(cpu::fp16_to_float(0x7c00)));
}

TEST_CASE("every finite fp16 value survives a round trip through fp32", "[kernels]") {
  int mismatches = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) continue;  // NaN
    if (cpu::float_to_fp16(cpu::fp16_to_float(static_cast<uint16_t>(h))) != h) ++mismatches;
  }
  CHECK(mismatches == 0);
}
