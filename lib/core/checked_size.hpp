// Sizes computed from numbers a user gave (flags, config.json, a checkpoint's arguments), in 64-bit
// arithmetic that never wraps around: an absurd model must not pass for a small one.
//   CheckedSize     throws mgt::Error on overflow (counts that must be exact);
//   SaturatingSize  sticks at kSaturated, "more than 64 bits hold" (estimates, which can still
//                   be compared with the memory available and reported as such).
// Both are for non-negative sizes.
#pragma once
#include <cstdint>
#include <limits>

#include "core/error.hpp"

namespace mgt {

class CheckedSize {
public:
  constexpr CheckedSize(std::int64_t value = 0) : value_(value) {}  // NOLINT: converts on purpose
  constexpr std::int64_t value() const { return value_; }

  friend CheckedSize operator+(CheckedSize a, CheckedSize b) {
    std::int64_t out = 0;
    if (__builtin_add_overflow(a.value_, b.value_, &out)) overflow();
    return out;
  }
  friend CheckedSize operator*(CheckedSize a, CheckedSize b) {
    std::int64_t out = 0;
    if (__builtin_mul_overflow(a.value_, b.value_, &out)) overflow();
    return out;
  }
  CheckedSize& operator+=(CheckedSize b) { return *this = *this + b; }

private:
  [[noreturn]] static void overflow() {
    throw Error("the model is too large: its sizes overflow 64-bit arithmetic (more than 9.2e18)");
  }
  std::int64_t value_;
};

class SaturatingSize {
public:
  static constexpr std::int64_t kSaturated = std::numeric_limits<std::int64_t>::max();

  constexpr SaturatingSize(std::int64_t value = 0) : value_(value) {}  // NOLINT: converts on purpose
  constexpr std::int64_t value() const { return value_; }
  constexpr bool saturated() const { return value_ == kSaturated; }

  friend SaturatingSize operator+(SaturatingSize a, SaturatingSize b) {
    std::int64_t out = 0;
    if (a.saturated() || b.saturated() || __builtin_add_overflow(a.value_, b.value_, &out)) return kSaturated;
    return out;
  }
  friend SaturatingSize operator*(SaturatingSize a, SaturatingSize b) {
    if (a.value_ == 0 || b.value_ == 0) return 0;
    std::int64_t out = 0;
    if (a.saturated() || b.saturated() || __builtin_mul_overflow(a.value_, b.value_, &out)) return kSaturated;
    return out;
  }
  // ceil(a / b) for b > 0; saturated stays saturated.
  friend SaturatingSize divide_up(SaturatingSize a, std::int64_t b) {
    if (a.saturated()) return a;
    return a.value_ / b + (a.value_ % b != 0 ? 1 : 0);
  }
  SaturatingSize& operator+=(SaturatingSize b) { return *this = *this + b; }

private:
  std::int64_t value_;
};

}  // namespace mgt
