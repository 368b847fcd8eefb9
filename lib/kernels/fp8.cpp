#include "kernels/fp8.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace mgt {
namespace {

struct Fp8Layout {
  int mantissa_bits;
  int bias;
};

constexpr Fp8Layout layout(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? Fp8Layout{3, 7} : Fp8Layout{2, 15};
}

// The value of a code's magnitude bits (0x00 … 0x7f), by the formats' definitions.
float magnitude(uint8_t bits, Fp8Format format) {
  const Fp8Layout f = layout(format);
  const int exponent = bits >> f.mantissa_bits;
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  const int max_exponent = (1 << (7 - f.mantissa_bits)) - 1;
  if (format == Fp8Format::kE4M3 && exponent == max_exponent && mantissa == (1 << f.mantissa_bits) - 1)
    return std::numeric_limits<float>::quiet_NaN();
  if (format == Fp8Format::kE5M2 && exponent == max_exponent)
    return mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  const float step = std::ldexp(1.0f, -f.mantissa_bits);
  if (exponent == 0) return std::ldexp(static_cast<float>(mantissa) * step, 1 - f.bias);
  return std::ldexp(1.0f + static_cast<float>(mantissa) * step, exponent - f.bias);
}

// The finite non-negative values of a format in code order: code i has value table[i]. Codes of
// consecutive magnitudes are consecutive integers, so "ties to even" is "ties to the even code".
struct FiniteValues {
  std::array<float, 128> value{};
  int count = 0;  // codes 0 … count−1 are finite
};

FiniteValues finite_values(Fp8Format format) {
  FiniteValues t;
  for (int code = 0; code < 128; ++code) {
    const float v = magnitude(static_cast<uint8_t>(code), format);
    if (!std::isfinite(v)) break;
    t.value[static_cast<size_t>(code)] = v;
    t.count = code + 1;
  }
  return t;
}

const FiniteValues& table(Fp8Format format) {
  static const FiniteValues e4m3 = finite_values(Fp8Format::kE4M3);
  static const FiniteValues e5m2 = finite_values(Fp8Format::kE5M2);
  return format == Fp8Format::kE4M3 ? e4m3 : e5m2;
}

}  // namespace

std::string_view fp8_format_name(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? "e4m3" : "e5m2";
}

float fp8_decode(uint8_t code, Fp8Format format) {
  const float m = magnitude(static_cast<uint8_t>(code & 0x7f), format);
  return (code & 0x80) ? -m : m;
}

uint8_t fp8_encode(float x, Fp8Format format) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const FiniteValues& t = table(format);
  const float a = std::fabs(x);
  const float* begin = t.value.data();
  const float* end = begin + t.count;
  // The first value >= a; a lies between its predecessor and it.
  const float* above = std::lower_bound(begin, end, a);
  if (above == end) return static_cast<uint8_t>(sign | (t.count - 1));  // saturate
  if (*above == a || above == begin) return static_cast<uint8_t>(sign | (above - begin));
  const float* below = above - 1;
  // Exact in double: both distances of fp32 values.
  const double down = static_cast<double>(a) - *below;
  const double up = static_cast<double>(*above) - a;
  const auto code_below = static_cast<uint8_t>(below - begin);
  uint8_t code = up < down ? static_cast<uint8_t>(code_below + 1) : code_below;
  if (up == down && (code_below & 1) != 0) code = static_cast<uint8_t>(code_below + 1);
  return static_cast<uint8_t>(sign | code);
}

float fp8_scaled_max(Fp8Format format, int margin) {
  return fp8_max(format) * std::pow(2.0f, static_cast<float>(-margin));
}

void fp8_delayed_scaling_update(std::span<float> history, std::span<float> scale, int64_t tensors,
                                int64_t history_len, Fp8AmaxAlgo algo, float scaled_max) {
  for (int64_t t = 0; t < tensors; ++t) {
    auto at = [&](int64_t row) -> float& { return history[static_cast<size_t>(row * tensors + t)]; };
    const float last = at(0);
    float largest = 0.0f;
    for (int64_t row = 0; row < history_len; ++row) largest = std::fmax(largest, at(row));
    // Roll towards the front: row i takes row i+1, the last row the old row 0, row 0 zeroed.
    for (int64_t row = 0; row + 1 < history_len; ++row) at(row) = at(row + 1);
    at(history_len - 1) = last;
    at(0) = 0.0f;
    const float amax = algo == Fp8AmaxAlgo::kMostRecent ? last : largest;
    if (std::isfinite(amax) && amax > 0.0f) scale[static_cast<size_t>(t)] = scaled_max / amax;
  }
}

float fp8_current_scale(float amax, Fp8Format format) {
  if (std::isinf(amax) || std::isnan(amax) || amax == 0.0f) return 1.0f;
  const float s = fp8_max(format) / amax;
  return std::isinf(s) ? std::numeric_limits<float>::max() : s;
}

}  // namespace mgt
