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

}  // namespace mgt::ckpt
