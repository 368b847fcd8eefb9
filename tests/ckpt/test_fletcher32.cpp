// hdf5_fletcher32 against Fletcher-32 computed word by word, on lengths that cross its blocks,
// odd lengths, all-zero and all-0xff data (HDF5 itself checks the files' checksums whenever the
// checkpoint tests read a shard back).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "ckpt/fletcher32.hpp"

namespace {

// The textbook definition, word by word: ones' complement sums (end-around carry) of the
// big-endian 16-bit words, an odd last byte as a word's high byte.
std::uint32_t reference_fletcher32(const std::vector<std::byte>& bytes) {
  const auto add = [](std::uint32_t a, std::uint32_t b) {
    const std::uint32_t s = a + b;
    return (s & 0xffff) + (s >> 16);
  };
  std::uint32_t sum1 = 0, sum2 = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 2) {
    std::uint32_t word = std::to_integer<std::uint32_t>(bytes[i]) << 8;
    if (i + 1 < bytes.size()) word |= std::to_integer<std::uint32_t>(bytes[i + 1]);
    sum1 = add(sum1, word);
    sum2 = add(sum2, sum1);
  }
  return (sum2 << 16) | sum1;
}

}  // namespace

TEST_CASE("hdf5_fletcher32 is HDF5's Fletcher-32", "[ckpt]") {
  std::mt19937 random(7);
  for (std::size_t n : {1u, 2u, 3u, 719u, 720u, 721u, 4096u, 131071u, 131072u, 131073u, 400001u}) {
    std::vector<std::byte> bytes(n);
    for (auto& b : bytes) b = static_cast<std::byte>(random());
    INFO(n);
    CHECK(mgt::ckpt::hdf5_fletcher32(bytes) == reference_fletcher32(bytes));
    std::fill(bytes.begin(), bytes.end(), std::byte{0});
    CHECK(mgt::ckpt::hdf5_fletcher32(bytes) == reference_fletcher32(bytes));
    std::fill(bytes.begin(), bytes.end(), std::byte{0xff});
    CHECK(mgt::ckpt::hdf5_fletcher32(bytes) == reference_fletcher32(bytes));
    bytes.back() = std::byte{1};  // a multiple of 65535 that is not zero
    CHECK(mgt::ckpt::hdf5_fletcher32(bytes) == reference_fletcher32(bytes));
  }
}
