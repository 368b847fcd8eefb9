// Megatron's fused QKV layout (attention.py get_query_key_value_tensors): the linear_qkv output
// of one token is grouped per query group j = 0…groups−1 as
//   [ q heads of group j (heads/groups blocks) | k_j | v_j ],
// each block `unit` floats long. For activations unit = head_dim and tokens = seq·batch; for the
// weight [(heads + 2·groups)·head_dim, hidden] take unit = head_dim·hidden and tokens = 1 (its
// bias: unit = head_dim, tokens = 1). Because tensor parallelism shards whole groups, the same
// functions work on a rank's local shard with its local head and group counts.
#pragma once
#include <cstdint>

namespace mgt::cpu {

// mixed[tokens, (heads + 2·groups)·unit] → q[tokens, heads·unit], k and v[tokens, groups·unit].
void qkv_split(const float* mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
               float* q, float* k, float* v);

// The inverse (and, for gradients, the backward of qkv_split).
void qkv_merge(const float* q, const float* k, const float* v, int64_t tokens, int64_t heads,
               int64_t groups, int64_t unit, float* mixed);

}  // namespace mgt::cpu
