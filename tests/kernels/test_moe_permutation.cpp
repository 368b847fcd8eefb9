// Backend::moe_permutation's tables on the CPU backend, written out by hand for a small routing:
// each expert's tokens in token order, its padding rows after them, the rows past the last empty,
// and the status bits for a token over topk and for rows past the tables. (The operation test,
// tests/kernels/test_backend_operations.cpp, holds every other backend to the CPU's.)
#include <catch2/catch.hpp>

#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"

using namespace mgt;

namespace {

struct Tables {
  std::vector<int64_t> row_token, row_slot, token_rows, slot_row, expert_rows;
};

// 4 tokens over 3 experts: t0 → e0, e2; t1 → e1, e2; t2 → e0, e1; t3 → e2.
Tables permute(const MoePermutation& p, int64_t max_rows) {
  const std::unique_ptr<Backend> b = make_backend("cpu");
  const std::vector<float> map = {1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1};
  DeviceBuffer routing(*b, static_cast<int64_t>(map.size()));
  b->copy_from_host(map, routing.view());
  DeviceIndexBuffer row_token(*b, max_rows), row_slot(*b, max_rows), token_rows(*b, p.tokens * p.topk),
      slot_row(*b, p.tokens * p.experts), expert_rows(*b, p.count + 1);
  b->moe_permutation(routing.view(), p, row_token.view(), row_slot.view(), token_rows.view(), slot_row.view(),
                     expert_rows.view());
  const auto read = [&](DeviceIndexBuffer& d) {
    std::vector<int64_t> host(static_cast<std::size_t>(d.view().size()));
    b->copy_to_host(DeviceSpan<const int64_t>(d.view()), std::span<int64_t>(host));
    return host;
  };
  return {read(row_token), read(row_slot), read(token_rows), read(slot_row), read(expert_rows)};
}

}  // namespace

TEST_CASE("moe permutation: every expert, no padding, an empty tail", "[kernels][moe]") {
  const Tables t = permute({4, 3, 0, 3, 2, -1, 1}, 8);
  CHECK(t.row_token == std::vector<int64_t>{0, 2, 1, 2, 0, 1, 3, -1});
  CHECK(t.row_slot == std::vector<int64_t>{0, 6, 4, 7, 2, 5, 11, -1});
  CHECK(t.token_rows == std::vector<int64_t>{0, 4, 2, 5, 1, 3, 6, -1});
  CHECK(t.slot_row == std::vector<int64_t>{0, -1, 4, -1, 2, 5, 1, 3, -1, -1, -1, 6});
  CHECK(t.expert_rows == std::vector<int64_t>{2, 2, 3, kMoePermutationOk});
}

TEST_CASE("moe permutation: a range of experts padded to a capacity and a row multiple", "[kernels][moe]") {
  // Experts 1 and 2, each padded to max(routed, 3) rounded up to a multiple of 2: 4 rows each.
  const Tables t = permute({4, 3, 1, 2, 2, 3, 2}, 10);
  CHECK(t.row_token == std::vector<int64_t>{1, 2, -1, -1, 0, 1, 3, -1, -1, -1});
  CHECK(t.row_slot == std::vector<int64_t>{4, 7, -1, -1, 2, 5, 11, -1, -1, -1});
  CHECK(t.token_rows == std::vector<int64_t>{4, -1, 0, 5, 1, -1, 6, -1});
  CHECK(t.slot_row == std::vector<int64_t>{-1, -1, 4, -1, 0, 5, -1, 1, -1, -1, -1, 6});
  CHECK(t.expert_rows == std::vector<int64_t>{4, 4, kMoePermutationOk});
}

TEST_CASE("moe permutation: the status names a token over topk and rows past the tables", "[kernels][moe]") {
  CHECK(permute({4, 3, 0, 3, 1, -1, 1}, 8).expert_rows.back() == kMoePermutationTooManyExperts);
  const Tables short_tables = permute({4, 3, 0, 3, 2, -1, 1}, 5);
  CHECK(short_tables.expert_rows.back() == kMoePermutationTooManyRows);
  CHECK(short_tables.row_token == std::vector<int64_t>{0, 2, 1, 2, 0});
}
