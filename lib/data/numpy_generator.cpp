#include "data/numpy_generator.hpp"

#include <bit>
#include <limits>
#include <string>

#include "core/error.hpp"

namespace mgt {

namespace {

// SeedSequence's hashing constants (O'Neill's seed_seq_fe, as NumPy adopted it).
constexpr std::uint32_t kInitA = 0x43b0d7e5u;
constexpr std::uint32_t kMultA = 0x931e8875u;
constexpr std::uint32_t kInitB = 0x8b51f9ddu;
constexpr std::uint32_t kMultB = 0x58f38dedu;
constexpr std::uint32_t kMixMultL = 0xca01f9ddu;
constexpr std::uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;

// hashmix: the multiplier evolves with every call, so the order of calls matters.
std::uint32_t hashmix(std::uint32_t value, std::uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

std::uint32_t mix(std::uint32_t x, std::uint32_t y) {
  std::uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// Full 64 x 64 -> 128-bit product, from 32-bit pieces to stay within ISO C++.
Uint128 multiply_64(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo;
  const std::uint64_t lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return {hi_hi + (hi_lo >> 32) + (cross >> 32), (cross << 32) | (lo_lo & 0xffffffffu)};
}

// a * b mod 2^128: the high x high product overflows out entirely.
Uint128 multiply(const Uint128& a, const Uint128& b) {
  Uint128 r = multiply_64(a.low, b.low);
  r.high += a.high * b.low + a.low * b.high;
  return r;
}

Uint128 add(const Uint128& a, const Uint128& b) {
  Uint128 r{a.high + b.high, a.low + b.low};
  if (r.low < a.low) ++r.high;
  return r;
}

// PCG's default 128-bit LCG multiplier.
constexpr Uint128 kPcgMultiplier{2549297995355413924ull, 4865540595714422341ull};

// Lemire's nearly divisionless bounded draw in [0, range] from 32-bit halves; NumPy's
// "buffered" variant buffers nothing for 32-bit outputs, each draw being one next_uint32().
std::uint32_t bounded_lemire_32(NumpyPcg64& bits, std::uint32_t range) {
  const std::uint32_t range_excl = range + 1;
  std::uint64_t m = static_cast<std::uint64_t>(bits.next_uint32()) * range_excl;
  auto leftover = static_cast<std::uint32_t>(m);
  if (leftover < range_excl) {
    const std::uint32_t threshold = (std::numeric_limits<std::uint32_t>::max() - range) % range_excl;
    while (leftover < threshold) {
      m = static_cast<std::uint64_t>(bits.next_uint32()) * range_excl;
      leftover = static_cast<std::uint32_t>(m);
    }
  }
  return static_cast<std::uint32_t>(m >> 32);
}

std::uint64_t bounded_lemire_64(NumpyPcg64& bits, std::uint64_t range) {
  const std::uint64_t range_excl = range + 1;
  Uint128 m = multiply_64(bits.next_uint64(), range_excl);
  if (m.low < range_excl) {
    const std::uint64_t threshold = (std::numeric_limits<std::uint64_t>::max() - range) % range_excl;
    while (m.low < threshold) m = multiply_64(bits.next_uint64(), range_excl);
  }
  return m.high;
}

// A uniform draw in [0, range] the way NumPy's bounded fill picks the draw width.
std::uint64_t bounded(NumpyPcg64& bits, std::uint64_t range) {
  if (range == 0) return 0;
  if (range == 0xffffffffull) return bits.next_uint32();  // Lemire-32 cannot take the full range
  if (range < 0xffffffffull) return bounded_lemire_32(bits, static_cast<std::uint32_t>(range));
  if (range == std::numeric_limits<std::uint64_t>::max()) return bits.next_uint64();
  return bounded_lemire_64(bits, range);
}

void check_bounds(std::int64_t low, std::int64_t high) {
  if (low >= high)
    throw Error("numpy integers: low >= high (" + std::to_string(low) + " >= " +
                std::to_string(high) + ")");
}

}  // namespace

NumpySeedSequence::NumpySeedSequence(std::uint64_t seed) {
  std::array<std::uint32_t, 2> words{static_cast<std::uint32_t>(seed),
                                     static_cast<std::uint32_t>(seed >> 32)};
  *this = NumpySeedSequence(std::span<const std::uint32_t>(words.data(), words[1] ? 2 : 1));
}

NumpySeedSequence::NumpySeedSequence(std::span<const std::uint32_t> entropy) {
  std::uint32_t hash_const = kInitA;
  for (std::size_t i = 0; i < pool_.size(); ++i)
    pool_[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
  for (std::size_t src = 0; src < pool_.size(); ++src)
    for (std::size_t dst = 0; dst < pool_.size(); ++dst)
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
  for (std::size_t src = pool_.size(); src < entropy.size(); ++src)
    for (std::size_t dst = 0; dst < pool_.size(); ++dst)
      pool_[dst] = mix(pool_[dst], hashmix(entropy[src], hash_const));
}

std::vector<std::uint32_t> NumpySeedSequence::generate_state32(std::size_t n_words) const {
  std::vector<std::uint32_t> state(n_words);
  std::uint32_t hash_const = kInitB;
  for (std::size_t i = 0; i < n_words; ++i) {
    std::uint32_t value = pool_[i % pool_.size()];
    value ^= hash_const;
    hash_const *= kMultB;
    value *= hash_const;
    value ^= value >> kXShift;
    state[i] = value;
  }
  return state;
}

std::vector<std::uint64_t> NumpySeedSequence::generate_state64(std::size_t n_words) const {
  std::vector<std::uint32_t> words = generate_state32(2 * n_words);
  std::vector<std::uint64_t> state(n_words);
  for (std::size_t i = 0; i < n_words; ++i)
    state[i] = static_cast<std::uint64_t>(words[2 * i]) |
               (static_cast<std::uint64_t>(words[2 * i + 1]) << 32);
  return state;
}

NumpyPcg64::NumpyPcg64(const NumpySeedSequence& seed) {
  // PCG64 seeds from four 64-bit words: the initial state (high, low), then the stream.
  std::vector<std::uint64_t> words = seed.generate_state64(4);
  const Uint128 initial_state{words[0], words[1]};
  const Uint128 stream{words[2], words[3]};
  // pcg_setseq_128_srandom_r: the increment must be odd; the seed enters between two steps.
  increment_ = {(stream.high << 1) | (stream.low >> 63), (stream.low << 1) | 1u};
  state_ = {};
  step();
  state_ = add(state_, initial_state);
  step();
}

void NumpyPcg64::step() { state_ = add(multiply(state_, kPcgMultiplier), increment_); }

std::uint64_t NumpyPcg64::next_uint64() {
  step();
  return std::rotr(state_.high ^ state_.low, static_cast<int>(state_.high >> 58));
}

std::uint32_t NumpyPcg64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const std::uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<std::uint32_t>(next >> 32);
  return static_cast<std::uint32_t>(next);
}

std::vector<std::int32_t> NumpyGenerator::integers_int32(std::int32_t low, std::int64_t high,
                                                         std::size_t size) {
  check_bounds(low, high);
  if (high > std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1)
    throw Error("numpy integers: high is out of bounds for int32 (" + std::to_string(high) + ")");
  const auto range = static_cast<std::uint32_t>(high - 1 - low);
  std::vector<std::int32_t> out(size);
  // The offset is added modulo 2^32, as NumPy does on unsigned values before the cast back.
  for (auto& v : out)
    v = static_cast<std::int32_t>(static_cast<std::uint32_t>(low) +
                                  static_cast<std::uint32_t>(bounded(bits_, range)));
  return out;
}

std::vector<std::int64_t> NumpyGenerator::integers_int64(std::int64_t low, std::int64_t high,
                                                         std::size_t size) {
  check_bounds(low, high);
  const std::uint64_t range = static_cast<std::uint64_t>(high) - 1 - static_cast<std::uint64_t>(low);
  std::vector<std::int64_t> out(size);
  for (auto& v : out)
    v = static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + bounded(bits_, range));
  return out;
}

}  // namespace mgt
