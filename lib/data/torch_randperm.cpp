#include "data/torch_randperm.hpp"

#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace mgt {

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  // Beyond it PyTorch shuffles another way (random64, inside-out): not needed by any split yet.
  if (n < 0 || n >= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max() / 20))
    throw Error("a random order of " + std::to_string(n) + " samples: PyTorch's permutation of more than " +
                std::to_string(std::numeric_limits<std::uint32_t>::max() / 20) + " is not reproduced");
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), std::int64_t{0});
  std::mt19937 engine(static_cast<std::uint32_t>(seed & 0xffffffffu));
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const std::int64_t z = static_cast<std::int64_t>(engine()) % (n - i);
    std::swap(r[static_cast<std::size_t>(i)], r[static_cast<std::size_t>(z + i)]);
  }
  return r;
}

}  // namespace mgt
