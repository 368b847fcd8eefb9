#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "data/numpy_random.hpp"

using namespace mgt;

// Golden values from NumPy 1.26 (legacy RandomState), e.g.
//   python3 -c "import numpy as np; rs=np.random.RandomState(1234);
//               print(rs.randint(0, 2**32, size=6, dtype=np.uint64))"   (one line)
// (a full-range 32-bit randint returns the raw MT19937 outputs).

TEST_CASE("MT19937 outputs match RandomState(seed)", "[index]") {
  NumpyRandomState r(1234);
  std::vector<std::uint32_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(r.next_uint32());
  CHECK(got == std::vector<std::uint32_t>{822569775U, 2137449171U, 2671936806U, 3512589365U,
                                          1880026316U, 2629000564U});
  NumpyRandomState zero(0);
  CHECK(zero.next_uint32() == 2357136044U);
  CHECK(zero.next_uint32() == 2546248239U);
  CHECK(zero.next_uint32() == 3071714933U);
  NumpyRandomState top(4294967295U);
  CHECK(top.next_uint32() == 419326371U);
  CHECK(top.next_uint32() == 479346978U);
  CHECK(top.next_uint32() == 3918654476U);
}

TEST_CASE("MT19937 regenerates its state like the reference generator", "[index]") {
  // randint(0, 2**32, size=700)[624] and [699] with seed 1234
  NumpyRandomState r(1234);
  std::mt19937 reference(1234);
  std::vector<std::uint32_t> draws;
  for (int i = 0; i < 2000; ++i) {
    draws.push_back(r.next_uint32());
    REQUIRE(draws.back() == reference());
  }
  CHECK(draws[624] == 303637765U);
  CHECK(draws[699] == 3323420446U);
}

TEST_CASE("64-bit draws put the first 32-bit output in the high half", "[index]") {
  // rs.randint(0, 2**64 - 1, dtype=np.uint64)[0] with seed 1234
  NumpyRandomState r(1234);
  CHECK(r.next_uint64() == 0x31076b2f7f66e2d3ULL);
  CHECK(r.next_uint64() == 0x9f428526d15ddc35ULL);
}

TEST_CASE("random_interval uses masked rejection, 64-bit above 32 bits", "[index]") {
  // rs.randint(0, 2**40 + 1, size=4, dtype=np.uint64) with seed 1234 (legacy masked path)
  NumpyRandomState r(1234);
  std::vector<std::uint64_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(r.random_interval(1ULL << 40));
  CHECK(got == std::vector<std::uint64_t>{878802328948ULL, 656147994617ULL, 617876871857ULL,
                                          662277595166ULL});
  NumpyRandomState z(1);
  CHECK(z.random_interval(0) == 0);
  for (int i = 0; i < 1000; ++i) REQUIRE(z.random_interval(5) <= 5);
}

TEST_CASE("shuffle reproduces RandomState.shuffle", "[index]") {
  // python3 -c "import numpy as np; a=np.arange(10); np.random.RandomState(1234).shuffle(a); print(a)"
  std::vector<std::int64_t> a(10);
  std::iota(a.begin(), a.end(), 0);
  NumpyRandomState r(1234);
  r.shuffle(std::span<std::int64_t>(a));
  CHECK(a == std::vector<std::int64_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3});

  // a=np.arange(1000); RandomState(1234).shuffle(a); a[:20], a[-10:], sum(i*a[i])
  std::vector<std::uint32_t> b(1000);
  std::iota(b.begin(), b.end(), 0U);
  NumpyRandomState r2(1234);
  r2.shuffle(std::span<std::uint32_t>(b));
  CHECK(std::vector<std::uint32_t>(b.begin(), b.begin() + 20) ==
        std::vector<std::uint32_t>{681, 990, 155, 768, 438, 363, 688, 555, 620, 99, 756, 428, 888,
                                   89, 982, 495, 29, 175, 466, 40});
  CHECK(std::vector<std::uint32_t>(b.end() - 10, b.end()) ==
        std::vector<std::uint32_t>{279, 689, 655, 664, 372, 204, 53, 294, 723, 815});
  std::uint64_t weighted = 0;
  for (std::size_t i = 0; i < b.size(); ++i) weighted += i * b[i];
  CHECK(weighted == 251398022ULL);
}

TEST_CASE("shuffle permutes values, not positions, and skips tiny arrays", "[index]") {
  // d=np.array([3,4,5,6,3,4,5,6], dtype=np.int32); RandomState(1234).shuffle(d)
  std::vector<std::int32_t> d = {3, 4, 5, 6, 3, 4, 5, 6};
  NumpyRandomState r(1234);
  r.shuffle(std::span<std::int32_t>(d));
  CHECK(d == std::vector<std::int32_t>{5, 4, 5, 3, 3, 4, 6, 6});

  // Empty and one-element arrays draw nothing: the stream is unchanged afterwards.
  NumpyRandomState s(1234);
  std::vector<std::int32_t> empty, one = {9};
  s.shuffle(std::span<std::int32_t>(empty));
  s.shuffle(std::span<std::int32_t>(one));
  CHECK(one == std::vector<std::int32_t>{9});
  CHECK(s.next_uint32() == 822569775U);
}
