#include "ckpt/fletcher32.hpp"

#include <algorithm>

namespace mgt::ckpt {

namespace {

constexpr std::uint64_t kModulus = 65535;

// The ones' complement residue HDF5's end-around-carry reduction leaves: 0 only for a sum that
// is 0, else in [1, 65535].
std::uint32_t ones_complement(std::uint64_t residue, bool any_nonzero) {
  if (!any_nonzero) return 0;
  return residue == 0 ? static_cast<std::uint32_t>(kModulus) : static_cast<std::uint32_t>(residue);
}

}  // namespace

std::uint32_t hdf5_fletcher32(std::span<const std::byte> bytes) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t words = bytes.size() / 2;
  // With w_1 … w_n the words, sum1 = Σ w_k and sum2 = Σ (n − k + 1)·w_k. Per block of m words
  // appended to (s1, s2): s2 += m·s1 + (m + 1)·Σ w_k − Σ k·w_k, s1 += Σ w_k. Blocks of 2^16
  // words keep Σ k·w_k below 2^48: no overflow of the 64-bit sums.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::uint64_t s1 = 0;
  std::uint64_t s2 = 0;
  bool any_nonzero = false;
  for (std::size_t begin = 0; begin < words; begin += kBlock) {
    const std::size_t m = std::min(kBlock, words - begin);
    const unsigned char* p = data + 2 * begin;
    std::uint64_t sum = 0;
    std::uint64_t weighted = 0;
    for (std::size_t k = 0; k < m; ++k) {
      const std::uint64_t w = (std::uint64_t{p[2 * k]} << 8) | p[2 * k + 1];
      sum += w;
      weighted += (k + 1) * w;
    }
    any_nonzero = any_nonzero || sum != 0;
    s2 = (s2 + (m % kModulus) * s1 + ((m + 1) % kModulus) * (sum % kModulus) + kModulus * kModulus -
          weighted % kModulus) % kModulus;
    s1 = (s1 + sum) % kModulus;
  }
  if (bytes.size() % 2 != 0) {
    const std::uint64_t w = std::uint64_t{data[bytes.size() - 1]} << 8;
    any_nonzero = any_nonzero || w != 0;
    s1 = (s1 + w) % kModulus;
    s2 = (s2 + s1) % kModulus;
  }
  return (ones_complement(s2, any_nonzero) << 16) | ones_complement(s1, any_nonzero);
}

}  // namespace mgt::ckpt
