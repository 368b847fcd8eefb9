// IEEE half precision (fp16) <-> fp32 on the host, as the GPU converts (round to nearest even,
// overflow to infinity, subnormals kept; NaN stays a quiet NaN): the CPU's conversions of fp16
// views, and the reference the GPU's are tested against.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mgt {

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: mantissa · 2⁻²⁴, exact in fp32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&bits, &magnitude, sizeof bits);
    bits |= sign;
  } else if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);  // rebias 15 → 127
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_fp16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude < 0x38800000u) {
    // Below fp16's smallest normal (2⁻¹⁴): a multiple of 2⁻²⁴, rounded to nearest even (the
    // default rounding mode); 1024 units is the smallest normal, whose encoding it also is.
    const float units = std::fabs(f) * 16777216.0f;  // exact: a power of two
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(units)));
  }
  // Rebias the exponent (127 → 15) and round the mantissa's low 13 bits to nearest even; a carry
  // runs into the exponent, and anything from 65520 up becomes infinity.
  uint32_t h = (magnitude - (112u << 23) + 0xfffu + ((magnitude >> 13) & 1u)) >> 13;
  if (h > 0x7c00u) h = 0x7c00u;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace mgt
