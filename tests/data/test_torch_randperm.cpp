// torch_randperm against torch.randperm(n, generator=torch.Generator().manual_seed(seed)) as
// PyTorch 2.11 printed it on 2026-11-29: each permutation's first 12 entries and Σ i·p[i] mod
// 1000003.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "data/torch_randperm.hpp"

using namespace mgt;

TEST_CASE("torch_randperm reproduces torch.randperm with a seeded CPU generator", "[data]") {
  struct Case {
    std::int64_t n;
    std::uint64_t seed;
    std::vector<std::int64_t> head;
    std::int64_t checksum;
  };
  const Case cases[] = {
      {10, 0, {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, 209},
      {50, 3, {36, 4, 27, 3, 32, 35, 6, 1, 2, 34, 44, 11}, 32548},
      {1000, 7, {615, 284, 599, 580, 347, 92, 383, 891, 452, 41, 998, 773}, 46212},
      {24, 1, {13, 2, 18, 20, 7, 6, 17, 23, 4, 21, 14, 11}, 3015},
      {100000, 12, {24363, 26969, 52794, 81816, 74633, 50951, 30775, 63650, 4004, 28215, 83014, 91042}, 798072},
  };
  for (const Case& c : cases) {
    INFO("n " << c.n << ", seed " << c.seed);
    const std::vector<std::int64_t> p = torch_randperm(c.n, c.seed);
    REQUIRE(static_cast<std::int64_t>(p.size()) == c.n);
    CHECK(std::vector<std::int64_t>(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(c.head.size())) == c.head);
    std::int64_t checksum = 0;
    for (std::size_t i = 0; i < p.size(); ++i) checksum = (checksum + static_cast<std::int64_t>(i) * p[i]) % 1000003;
    CHECK(checksum == c.checksum);
  }
  CHECK(torch_randperm(0, 5).empty());
  CHECK(torch_randperm(1, 5) == std::vector<std::int64_t>{0});
  CHECK_THROWS_WITH(torch_randperm(std::int64_t{1} << 32, 0), Catch::Contains("is not reproduced"));
}
