#include "ckpt/safetensors_format.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace mgt::ckpt {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; reading it on a big-endian host needs byte swaps");

namespace {

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) ? 1u : 0u;
  const int exponent = (h >> 10) & 0x1f;
  const std::uint32_t mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero and subnormals
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

// IEEE binary16 nearest to x, ties to even: the mantissa is shifted right with the bits shifted
// out deciding the rounding, subnormal results included.
std::uint16_t float_to_half(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN, quiet
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  const int exponent = static_cast<int>(abs >> 23) - 127;
  std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;  // implicit leading one
  int shift;                                                // bits dropped from the 24-bit mantissa
  std::uint32_t half_exponent;
  if (exponent < -14) {  // subnormal (or zero) in binary16
    if (exponent < -25) return sign;  // zero, or below half the smallest subnormal
    shift = 13 + (-14 - exponent);
    half_exponent = 0;
  } else {
    shift = 13;
    half_exponent = static_cast<std::uint32_t>(exponent + 15);
  }
  std::uint32_t result = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (result & 1u))) ++result;  // may carry into the exponent
  if (half_exponent == 0) return static_cast<std::uint16_t>(sign | result);
  // result holds the implicit one at bit 10; adding the exponent above it lets a carry out of the
  // mantissa bump the exponent, as it must.
  return static_cast<std::uint16_t>(sign | (((half_exponent - 1u) << 10) + result));
}

// bfloat16 nearest to x, ties to even: the upper half of the fp32 after rounding the lower half.
std::uint16_t float_to_bfloat16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF64: return "F64";
    case SafetensorsDType::kF32: return "F32";
    case SafetensorsDType::kF16: return "F16";
    case SafetensorsDType::kBF16: return "BF16";
  }
  return "?";
}

std::size_t safetensors_dtype_size(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF64: return 8;
    case SafetensorsDType::kF32: return 4;
    case SafetensorsDType::kF16:
    case SafetensorsDType::kBF16: return 2;
  }
  return 0;
}

std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name) {
  for (auto dtype : {SafetensorsDType::kF64, SafetensorsDType::kF32, SafetensorsDType::kF16, SafetensorsDType::kBF16})
    if (name == safetensors_dtype_name(dtype)) return dtype;
  return std::nullopt;
}

std::vector<float> safetensors_to_float32(SafetensorsDType dtype, std::span<const std::byte> bytes) {
  const std::size_t size = safetensors_dtype_size(dtype);
  if (bytes.size() % size != 0) throw Error("safetensors data is not a whole number of elements");
  std::vector<float> out(bytes.size() / size);
  const std::byte* p = bytes.data();
  switch (dtype) {
    case SafetensorsDType::kF32:
      std::memcpy(out.data(), p, bytes.size());
      break;
    case SafetensorsDType::kF64:
      for (std::size_t i = 0; i < out.size(); ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    case SafetensorsDType::kF16:
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      break;
    case SafetensorsDType::kBF16:
      // bfloat16 is the upper half of an fp32: widening is a shift.
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
      }
      break;
  }
  return out;
}

std::vector<std::byte> float32_to_safetensors(SafetensorsDType dtype, std::span<const float> values) {
  std::vector<std::byte> out(values.size() * safetensors_dtype_size(dtype));
  std::byte* p = out.data();
  switch (dtype) {
    case SafetensorsDType::kF32:
      std::memcpy(p, values.data(), out.size());
      break;
    case SafetensorsDType::kF64:
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double v = values[i];
        std::memcpy(p + 8 * i, &v, 8);
      }
      break;
    case SafetensorsDType::kF16:
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t h = float_to_half(values[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case SafetensorsDType::kBF16:
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t h = float_to_bfloat16(values[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
  }
  return out;
}

}  // namespace mgt::ckpt
