#include "data/numpy_random.hpp"

namespace mgt {

namespace {
constexpr std::size_t kStateSize = 624;
constexpr std::size_t kShift = 397;
constexpr std::uint32_t kMatrixA = 0x9908b0dfU;
constexpr std::uint32_t kUpperMask = 0x80000000U;
constexpr std::uint32_t kLowerMask = 0x7fffffffU;
}  // namespace

NumpyRandomState::NumpyRandomState(std::uint32_t seed) {
  key_[0] = seed;
  for (std::size_t i = 1; i < kStateSize; ++i) {
    std::uint32_t prev = key_[i - 1];
    key_[i] = 1812433253U * (prev ^ (prev >> 30)) + static_cast<std::uint32_t>(i);
  }
  pos_ = kStateSize;
}

void NumpyRandomState::regenerate() {
  auto twist = [](std::uint32_t upper, std::uint32_t lower) {
    std::uint32_t y = (upper & kUpperMask) | (lower & kLowerMask);
    return (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  };
  std::size_t i = 0;
  for (; i < kStateSize - kShift; ++i) key_[i] = key_[i + kShift] ^ twist(key_[i], key_[i + 1]);
  for (; i < kStateSize - 1; ++i)
    key_[i] = key_[i + kShift - kStateSize] ^ twist(key_[i], key_[i + 1]);
  key_[kStateSize - 1] = key_[kShift - 1] ^ twist(key_[kStateSize - 1], key_[0]);
  pos_ = 0;
}

std::uint32_t NumpyRandomState::next_uint32() {
  if (pos_ == kStateSize) regenerate();
  std::uint32_t y = key_[pos_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

std::uint64_t NumpyRandomState::next_uint64() {
  std::uint64_t high = next_uint32();
  std::uint64_t low = next_uint32();
  return (high << 32) | low;
}

std::uint64_t NumpyRandomState::random_interval(std::uint64_t max) {
  if (max == 0) return 0;
  std::uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  std::uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (next_uint32() & mask)) > max) {
    }
  } else {
    while ((value = (next_uint64() & mask)) > max) {
    }
  }
  return value;
}

}  // namespace mgt
