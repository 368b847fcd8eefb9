#include "kernels/cpu/qkv_layout.hpp"

#include <algorithm>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

void check(int64_t tokens, int64_t heads, int64_t groups, int64_t unit, const char* name) {
  require_nonnegative(tokens, name, "tokens");
  require_nonnegative(unit, name, "unit");
  require(groups > 0 && heads > 0 && heads % groups == 0, name, "groups must divide heads");
}

// Visits the three (mixed block, separate block) pairs of every group of every token.
template <typename Copy>
void for_each_block(int64_t tokens, int64_t heads, int64_t groups, int64_t unit, Copy copy) {
  const int64_t per_group = heads / groups;
  const int64_t mixed_row = (heads + 2 * groups) * unit;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t group_start = t * mixed_row + g * (per_group + 2) * unit;
      const int64_t q_start = (t * heads + g * per_group) * unit;
      const int64_t kv_start = (t * groups + g) * unit;
      copy(group_start, 0, q_start, per_group * unit);
      copy(group_start + per_group * unit, 1, kv_start, unit);
      copy(group_start + (per_group + 1) * unit, 2, kv_start, unit);
    }
  }
}

}  // namespace

void qkv_split(const float* mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
               float* q, float* k, float* v) {
  check(tokens, heads, groups, unit, "qkv_split");
  float* const parts[3] = {q, k, v};
  for_each_block(tokens, heads, groups, unit,
                 [&](int64_t mixed_at, int part, int64_t part_at, int64_t count) {
                   std::copy_n(mixed + mixed_at, count, parts[part] + part_at);
                 });
}

void qkv_merge(const float* q, const float* k, const float* v, int64_t tokens, int64_t heads,
               int64_t groups, int64_t unit, float* mixed) {
  check(tokens, heads, groups, unit, "qkv_merge");
  const float* const parts[3] = {q, k, v};
  for_each_block(tokens, heads, groups, unit,
                 [&](int64_t mixed_at, int part, int64_t part_at, int64_t count) {
                   std::copy_n(parts[part] + part_at, count, mixed + mixed_at);
                 });
}

}  // namespace mgt::cpu
