// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror & Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC 2011). A pure function of (counter, key): any element of a
// random stream can be produced without producing those before it, so dropout masks can be
// regenerated in the backward, on any shard, and after a resume, from a few integers; the model's
// parameter initialisation draws from it too (model/parameter_init.cpp). Header-only and free of
// library calls so a device implementation can share the definition.
#pragma once
#include <array>
#include <cstdint>

namespace mgt {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

namespace philox_detail {

constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
// Weyl sequence increments for the key schedule (golden ratio and √3 − 1 in 32-bit fixed point).
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

constexpr PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = static_cast<uint64_t>(kMultiplier0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kMultiplier1) * c[2];
  const auto hi0 = static_cast<uint32_t>(p0 >> 32);
  const auto lo0 = static_cast<uint32_t>(p0);
  const auto hi1 = static_cast<uint32_t>(p1 >> 32);
  const auto lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

}  // namespace philox_detail

constexpr PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += philox_detail::kWeyl0;
      key[1] += philox_detail::kWeyl1;
    }
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

// The four words of block `block` of stream `stream` under `seed`: the counter {lo(block),
// hi(block), lo(stream), hi(stream)} and the key {lo(seed), hi(seed)} (the dropout masks' stream,
// kernels/cpu/dropout.hpp).
constexpr PhiloxCounter philox_stream_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

}  // namespace mgt
