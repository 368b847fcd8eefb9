// Embedding lookup over a local slice of a table, written for the vocab-parallel embedding: this
// rank holds rows [vocab_start, vocab_start + local_rows) of the full table; ids outside that
// range produce zero rows here and are filled in by the other ranks' all-reduce. A learned
// position embedding is the same lookup with positions as ids (and vocab_start = 0).
#pragma once
#include <cstdint>

namespace mgt::cpu {

// out[n, hidden] = table[ids[t] − vocab_start] or zeros; table is [local_rows, hidden].
void embedding_forward(const int64_t* ids, int64_t n, const float* table, int64_t vocab_start,
                       int64_t local_rows, int64_t hidden, float* out);

// dtable[ids[t] − vocab_start] += dout[t] for in-range ids (repeated ids add up).
void embedding_backward(const int64_t* ids, int64_t n, const float* dout, int64_t vocab_start,
                        int64_t local_rows, int64_t hidden, float* dtable);

}  // namespace mgt::cpu
