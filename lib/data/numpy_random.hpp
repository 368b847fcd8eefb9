// NumPy's legacy random stream (numpy.random.RandomState) reproduced bit for bit, because
// Megatron shuffles its dataset indices with it: the same seed must give the same sample order
// in mgt as in Megatron (spec/megatron.md §4.4).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace mgt {

class NumpyRandomState {
public:
  // RandomState(seed): MT19937 init_genrand with a 32-bit seed (NumPy refuses larger seeds).
  explicit NumpyRandomState(std::uint32_t seed);

  std::uint32_t next_uint32();
  // Two 32-bit draws, the first one in the high half (NumPy's mt19937_next64).
  std::uint64_t next_uint64();

  // A uniform integer in [0, max] by masked rejection: the smallest all-ones mask covering
  // `max`, redrawing while the masked draw exceeds it. 32-bit draws while max fits 32 bits.
  std::uint64_t random_interval(std::uint64_t max);

  // RandomState.shuffle of a 1-D array: Fisher-Yates from the last element down to index 1.
  template <typename T>
  void shuffle(std::span<T> values) {
    if (values.size() < 2) return;
    for (std::size_t i = values.size() - 1; i >= 1; --i) {
      auto j = static_cast<std::size_t>(random_interval(i));
      std::swap(values[i], values[j]);
    }
  }

private:
  void regenerate();
  std::array<std::uint32_t, 624> key_{};
  std::size_t pos_ = 624;
};

}  // namespace mgt
