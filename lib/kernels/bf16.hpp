// bf16 <-> fp32 on the host, bit for bit as the GPU converts (round to nearest even; NaN stays a
// quiet NaN): the CPU's conversions of bf16 views, and the reference the GPU's are tested against.
#pragma once
#include <cstdint>
#include <cstring>

namespace mgt {

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace mgt
