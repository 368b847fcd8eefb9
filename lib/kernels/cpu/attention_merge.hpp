// The merge of two attentions of the same queries over disjoint parts of the keys, by their
// log-sum-exps (Backend::attention_merge): what ring attention does after each step.
#pragma once
#include <cstdint>

#include "kernels/operation_params.hpp"

namespace mgt::cpu {

// Rows [first_row, first_row + part_rows) of out ([whole]) and lse ([batch, heads, whole.seq])
// merged with part_out ([part_rows, …] in whole's layout) and part_lse ([batch, heads,
// part_rows]). A row whose lse is −∞ (no key seen yet) takes the part's as it is.
void attention_merge(const float* part_out, const float* part_lse, const HeadTensor& whole, int64_t first_row,
                     int64_t part_rows, float* out, float* lse);

}  // namespace mgt::cpu
