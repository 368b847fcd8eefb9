// NumPy's modern random stream (numpy.random.default_rng: SeedSequence -> PCG64 -> Generator)
// reproduced bit for bit, because Megatron's mock dataset draws its sequence lengths from
// default_rng(0) (spec/megatron.md §4.9): the same lengths give the same samples as Megatron.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mgt {

// numpy.random.SeedSequence with the default pool of four 32-bit words and no spawn key.
class NumpySeedSequence {
public:
  // The entropy of an integer seed: its 32-bit words, least significant first ([0] for 0).
  explicit NumpySeedSequence(std::uint64_t seed);
  explicit NumpySeedSequence(std::span<const std::uint32_t> entropy);

  const std::array<std::uint32_t, 4>& pool() const { return pool_; }
  // generate_state(n_words, uint32) and generate_state(n_words, uint64); a 64-bit word is two
  // consecutive 32-bit words, the first one in the low half (NumPy views them little-endian).
  std::vector<std::uint32_t> generate_state32(std::size_t n_words) const;
  std::vector<std::uint64_t> generate_state64(std::size_t n_words) const;

private:
  std::array<std::uint32_t, 4> pool_{};
};

// A 128-bit unsigned integer as two halves, enough for PCG64's state and increment.
struct Uint128 {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  friend bool operator==(const Uint128&, const Uint128&) = default;
};

// numpy.random.PCG64: a 128-bit LCG whose 64-bit output is XSL-RR of the advanced state.
class NumpyPcg64 {
public:
  explicit NumpyPcg64(const NumpySeedSequence& seed);
  explicit NumpyPcg64(std::uint64_t seed) : NumpyPcg64(NumpySeedSequence(seed)) {}

  std::uint64_t next_uint64();
  // Half of a 64-bit draw: the low half first, the high half kept for the next call.
  std::uint32_t next_uint32();

  Uint128 state() const { return state_; }
  Uint128 increment() const { return increment_; }

private:
  void step();
  Uint128 state_;
  Uint128 increment_;
  bool has_uint32_ = false;
  std::uint32_t uinteger_ = 0;
};

// numpy.random.Generator over PCG64: the methods mgt needs, drawing exactly as NumPy does.
class NumpyGenerator {
public:
  // numpy.random.default_rng(seed).
  explicit NumpyGenerator(std::uint64_t seed) : bits_(seed) {}

  // Generator.integers(low, high, size, dtype=int32) with endpoint=False: Lemire's bounded
  // draws from 32-bit halves. Throws mgt::Error when low >= high.
  std::vector<std::int32_t> integers_int32(std::int32_t low, std::int64_t high, std::size_t size);
  // The same with dtype=int64 (NumPy's default): 32-bit draws while the range fits 32 bits,
  // else 64-bit draws.
  std::vector<std::int64_t> integers_int64(std::int64_t low, std::int64_t high, std::size_t size);

  NumpyPcg64& bit_generator() { return bits_; }

private:
  NumpyPcg64 bits_;
};

}  // namespace mgt
