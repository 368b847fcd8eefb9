// Megatron's load-balanced split of the sequence over context-parallel ranks
// (megatron/core/utils.py get_batch_on_this_cp_rank).
#include <catch2/catch.hpp>

#include <vector>

#include "core/error.hpp"
#include "model/context_parallel_split.hpp"

using namespace mgt;
using Positions = std::vector<int64_t>;

TEST_CASE("context-parallel rank i holds chunks i and 2N-1-i", "[model][context-parallel]") {
  // 16 tokens, CP 2: chunks of 4; rank 0 chunks 0 and 3, rank 1 chunks 1 and 2.
  CHECK(context_parallel_positions(16, 2, 0) == Positions{0, 1, 2, 3, 12, 13, 14, 15});
  CHECK(context_parallel_positions(16, 2, 1) == Positions{4, 5, 6, 7, 8, 9, 10, 11});
  // CP 4: chunks of 1 token.
  CHECK(context_parallel_positions(8, 4, 0) == Positions{0, 7});
  CHECK(context_parallel_positions(8, 4, 3) == Positions{3, 4});
  CHECK(context_parallel_positions(4, 1, 0) == Positions{0, 1, 2, 3});
}

TEST_CASE("every position is held by exactly one context-parallel rank", "[model][context-parallel]") {
  for (const int64_t cp : {2, 3, 4}) {
    std::vector<int> held(24, 0);
    for (int64_t r = 0; r < cp; ++r)
      for (const int64_t p : context_parallel_positions(24, cp, r)) ++held[static_cast<size_t>(p)];
    INFO("CP " << cp);
    CHECK(held == std::vector<int>(24, 1));
  }
}

TEST_CASE("a micro-batch is split row by row, position ids following the tokens", "[model][context-parallel]") {
  // Two rows of 8 tokens: token = 100·row + position.
  std::vector<int64_t> tokens, labels;
  std::vector<float> mask;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 8; ++s) {
      tokens.push_back(100 * b + s);
      labels.push_back(100 * b + s + 1);
      mask.push_back(s % 2 == 0 ? 1.0f : 0.0f);
    }
  MicroBatch batch;
  batch.batch_size = 2;
  batch.seq_length = 8;
  batch.tokens = tokens;
  batch.labels = labels;
  batch.loss_mask = mask;
  const ContextParallelBatch part = split_for_context_parallel_rank(batch, 2, 1);
  CHECK(part.batch_size == 2);
  CHECK(part.seq_length == 4);
  CHECK(part.tokens == Positions{2, 3, 4, 5, 102, 103, 104, 105});
  CHECK(part.labels == Positions{3, 4, 5, 6, 103, 104, 105, 106});
  CHECK(part.position_ids == Positions{2, 3, 4, 5, 2, 3, 4, 5});
  CHECK(part.loss_mask == std::vector<float>{1, 0, 1, 0, 1, 0, 1, 0});
  const MicroBatch view = part.view();
  CHECK(view.seq_length == 4);
  CHECK(view.tokens.size() == 8);

  // Given position ids (--reset-position-ids) are split, not regenerated.
  std::vector<int64_t> positions = {0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 0, 1, 2, 3, 4, 5};
  batch.position_ids = positions;
  CHECK(split_for_context_parallel_rank(batch, 2, 0).position_ids == Positions{0, 1, 3, 4, 0, 1, 4, 5});
}

TEST_CASE("a sequence length that 2 x context-parallel size does not divide is refused", "[model][context-parallel]") {
  CHECK_NOTHROW(check_context_parallel_sequence(12, 3));
  try {
    check_context_parallel_sequence(12, 4);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK(std::string(e.what()) ==
          "--seq-length (12) must be divisible by 2 x --context-parallel-size (8): each sequence is cut into 2 x "
          "context-parallel-size equal chunks");
  }
}
