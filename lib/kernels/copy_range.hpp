// Pieces of buffers for the batched operations, which do in one launch what would otherwise take
// one per piece.
#pragma once
#include <cstdint>

namespace mgt {

// One piece of a batched copy (Backend::copy_ranges): `count` elements from element `src` of the
// source to element `dst` of the destination.
struct CopyRange {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t count = 0;
};

// Elements [begin, begin + count) of one buffer (Backend::sum_of_squares over several runs).
struct ElementRange {
  int64_t begin = 0;
  int64_t count = 0;
};

}  // namespace mgt
