// One piece of a batched copy (Backend::copy_ranges): `count` elements from element `src` of the
// source to element `dst` of the destination.
#pragma once
#include <cstdint>

namespace mgt {

struct CopyRange {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t count = 0;
};

}  // namespace mgt
