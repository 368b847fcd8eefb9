#include "kernels/cuda/moe_routing.hpp"

#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"
#include "kernels/moe_routing_math.hpp"

namespace mgt::cuda {

namespace {

// One thread per token: the top-k choice into routing_map (probs' row as scratch), the gates, and
// a copy of the choice for the capacity kernel.
__global__ void route_rows_kernel(const float* logits, MoeRoutingParams p, float* gates, float* probs,
                                  float* routing_map, float* chosen) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  const int64_t E = p.experts;
  const float* row = logits + t * E;
  moe_math::choose_topk(row, p, routing_map + t * E, probs + t * E,
                        p.choice_scores != nullptr ? p.choice_scores + t * E : nullptr);
  moe_math::topk_gates(row, p, routing_map + t * E, gates + t * E);
  for (int64_t e = 0; e < E; ++e) {
    probs[t * E + e] = gates[t * E + e];
    chosen[t * E + e] = routing_map[t * E + e];
  }
}

// One thread per (token, expert): a routed token's rank in its expert's column (by gate, ties to
// the earlier token, or by position); beyond the capacity it is dropped. Reads only `chosen` and
// `gates`, which no thread writes.
__global__ void capacity_kernel(MoeRoutingParams p, const float* gates, const float* chosen, float* probs,
                                float* routing_map) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t E = p.experts;
  if (i >= p.tokens * E) return;
  if (chosen[i] <= 0.0f) return;
  const int64_t t = i / E;
  const int64_t e = i % E;
  const float mine = gates[i];
  int64_t rank = 0;
  for (int64_t u = 0; u < p.tokens; ++u) {
    if (u == t || chosen[u * E + e] <= 0.0f) continue;
    const float other = gates[u * E + e];
    if (p.drop_by_position ? u < t : (other > mine || (other == mine && u < t))) ++rank;
  }
  if (rank >= p.capacity) {
    probs[i] = 0.0f;
    routing_map[i] = 0.0f;
  }
}

// Threads of the reduction blocks below, and the most blocks of the z-loss's partial sums.
constexpr int kSumThreads = 256;
constexpr int kZBlocks = 128;

// A block's fixed-order tree sum of each thread's `value` (deterministic): thread 0 gets the total.
template <typename T>
__device__ T block_sum(T value, T* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// Tokens of one auxiliary group per block of the sums below (two per thread): the blocks of a
// (group, expert) pair, their chunks of the group's tokens.
constexpr int64_t kAuxChunkTokens = 2 * kSumThreads;
constexpr int64_t kMaxAuxChunks = 64;

int64_t aux_chunks(const MoeRoutingParams& p) {
  const int64_t group_tokens = (p.tokens + p.aux_groups - 1) / std::max<int64_t>(p.aux_groups, 1);
  return std::clamp<int64_t>((group_tokens + kAuxChunkTokens - 1) / kAuxChunkTokens, 1, kMaxAuxChunks);
}

// One block per (group, expert, chunk): that chunk's share of the auxiliary loss's token count and
// score sum, the group's k-th token being a + k·aux_groups, chunk c taking k = c, c + chunks, …
// over the block's threads. With p.aux_from_counts the counts are given: none is counted.
__global__ void aux_partials_kernel(const float* logits, MoeRoutingParams p, int64_t chunks, double* partial_sums,
                                    double* partial_counts) {
  __shared__ double sums[kSumThreads];
  __shared__ double counts[kSumThreads];
  const int64_t i = blockIdx.x;
  const int64_t E = p.experts;
  const int64_t pair = i / chunks;
  const int64_t chunk = i % chunks;
  const int64_t a = pair / E;
  const int64_t e = pair % E;
  double count = 0.0;
  double sum = 0.0;
  const int64_t step = kSumThreads * chunks * p.aux_groups;
  for (int64_t t = a + (chunk + threadIdx.x * chunks) * p.aux_groups; t < p.tokens; t += step) {
    const float* row = logits + t * E;
    const float max = moe_math::row_max(row, E);
    const float exp_sum = moe_math::row_exp_sum(row, E, max);
    const float sigmoid_sum = moe_math::sigmoid_row_sum(row, E);
    sum += moe_math::aux_score(row, e, p, max, exp_sum, sigmoid_sum);
    if (!p.aux_from_counts && moe_math::in_aux_topk(row, e, p, max, exp_sum, sigmoid_sum)) count += 1.0;
  }
  sum = block_sum(sum, sums);
  count = block_sum(count, counts);
  if (threadIdx.x == 0) {
    partial_sums[i] = sum;
    partial_counts[i] = count;
  }
}

// One thread per (group, expert): its chunks' partial sums added in order into the score sum and,
// unless given, the token count.
__global__ void aux_finish_kernel(MoeRoutingParams p, int64_t chunks, const double* partial_sums,
                                  const double* partial_counts, float* aux_counts, double* score_sums) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.aux_groups * p.experts) return;
  double sum = 0.0, count = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    sum += partial_sums[i * chunks + c];
    count += partial_counts[i * chunks + c];
  }
  score_sums[i] = sum;
  if (!p.aux_from_counts) aux_counts[i] = static_cast<float>(count);
}

// The z-loss's Σ logsumexp² over the tokens, one partial sum per block (at most kZBlocks),
// each block's tokens strided over its threads.
__global__ void z_partials_kernel(const float* logits, MoeRoutingParams p, double* partials) {
  __shared__ double sums[kSumThreads];
  const int64_t E = p.experts;
  double z = 0.0;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kSumThreads + threadIdx.x; t < p.tokens;
       t += static_cast<int64_t>(gridDim.x) * kSumThreads) {
    const float* row = logits + t * E;
    const float max = moe_math::row_max(row, E);
    const double lse = static_cast<double>(max) + log(static_cast<double>(moe_math::row_exp_sum(row, E, max)));
    z += lse * lse;
  }
  z = block_sum(z, sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = z;
}

// One thread: the statistics from the partial sums, in a fixed order. Partitioned
// (p.aux_partitions > 1), the first pass adds no auxiliary statistic (its counts are this rank's
// only) and the second (p.aux_from_counts) only that.
__global__ void statistics_kernel(MoeRoutingParams p, const float* aux_counts, const double* score_sums,
                                  const double* z_partials, int z_blocks, double aux_factor, double* statistics,
                                  bool accumulate) {
  const int64_t E = p.experts;
  double aux = 0.0;
  if (p.aux_partitions == 1 || p.aux_from_counts)
    for (int64_t i = 0; i < p.aux_groups * E; ++i) aux += score_sums[i] * aux_counts[i];
  aux *= aux_factor;
  statistics[0] = accumulate ? statistics[0] + aux : aux;
  if (p.aux_from_counts) return;
  double z = 0.0;
  if (p.z_loss) {
    for (int b = 0; b < z_blocks; ++b) z += z_partials[b];
    z /= static_cast<double>(p.tokens);
  }
  statistics[1] = accumulate ? statistics[1] + z : z;
}

__global__ void route_backward_kernel(const float* logits, MoeRoutingParams p, const float* d_probs,
                                      const float* routing_map, const float* aux_counts, float aux_factor,
                                      float z_factor, float* d_logits, float* scratch) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  const int64_t E = p.experts;
  float* chosen = scratch + t * 3 * E;
  float* choice_scratch = chosen + E;
  float* d_gates = chosen + 2 * E;
  const float* row = logits + t * E;
  moe_math::backward_choice(row, routing_map + t * E, p, chosen, choice_scratch);
  for (int64_t e = 0; e < E; ++e) d_gates[e] = d_probs[t * E + e] * routing_map[t * E + e];
  const float* counts = p.aux_groups > 0 ? aux_counts + (t % p.aux_groups) * E : nullptr;
  moe_math::logits_gradient(row, p, chosen, d_gates, counts, aux_factor, z_factor, d_logits + t * E);
}

// Sinkhorn's rounds in one block (they take a few to a few tens of rounds, each a pass over the
// [tokens, experts] matrix by rows and one by columns). The matrix and the tokens' factors live in
// shared memory where they fit (rows padded to an odd stride: a warp's rows fall in distinct
// banks), else in `cost` and `d0`. Each token's factor from its row, a thread per token; each
// expert's from its column, the block as `columns` experts (a power of two up to 32) × `groups`
// groups of tokens, each group's partial sum of every groups-th token, the partial sums added in a
// fixed tree; the mean change of the experts' factors on thread 0.
constexpr int kSinkhornThreads = 1024;

struct SinkhornShape {
  int64_t stride;  // of a row of the matrix in shared memory; E in global memory
  int columns;
  int groups;
  bool in_shared;
};

__global__ void __launch_bounds__(kSinkhornThreads)
    sinkhorn_kernel(const float* logits, int64_t T, int64_t E, SinkhornShape shape, float* cost, float* d0) {
  extern __shared__ float shared[];
  float* d1 = shared;
  float* updated = d1 + E;
  float* partial = updated + E;
  float* error = partial + kSinkhornThreads;
  float* matrix = cost;
  float* tokens = d0;
  if (shape.in_shared) {
    matrix = error + 1;
    tokens = matrix + T * shape.stride;
  }
  const int64_t stride = shape.in_shared ? shape.stride : E;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t i = tid; i < T * E; i += kSinkhornThreads) matrix[i / E * stride + i % E] = expf(logits[i]);
  for (int64_t e = tid; e < E; e += kSinkhornThreads) d1[e] = 1.0f;
  if (tid == 0) *error = 1e9f;
  __syncthreads();
  const float inverse_tokens = moe_math::sinkhorn_inverse_count(T);
  const float inverse_experts = moe_math::sinkhorn_inverse_count(E);
  const int column = tid % shape.columns;
  const int group = tid / shape.columns;
  for (int round = 0; *error > moe_math::kSinkhornTolerance && round < moe_math::kSinkhornMaxRounds; ++round) {
    for (int64_t t = tid; t < T; t += kSinkhornThreads) {
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += d1[e] * matrix[t * stride + e];
      tokens[t] = moe_math::sinkhorn_factor(sum, inverse_tokens);
    }
    __syncthreads();
    for (int64_t e0 = 0; e0 < E; e0 += shape.columns) {
      const int64_t e = e0 + column;
      float sum = 0.0f;
      if (e < E && group < shape.groups)
        for (int64_t t = group; t < T; t += shape.groups) sum += tokens[t] * matrix[t * stride + e];
      partial[tid] = sum;
      __syncthreads();
      for (int half = shape.groups / 2; half > 0; half /= 2) {
        if (group < half) partial[tid] += partial[tid + half * shape.columns];
        __syncthreads();
      }
      if (tid < shape.columns && e < E) updated[e] = moe_math::sinkhorn_factor(partial[tid], inverse_experts);
      __syncthreads();
    }
    if (tid == 0) {
      float change = 0.0f;
      for (int64_t e = 0; e < E; ++e) change += fabsf(d1[e] - updated[e]);
      *error = change / static_cast<float>(E);
    }
    __syncthreads();
    for (int64_t e = tid; e < E; e += kSinkhornThreads) d1[e] = updated[e];
    __syncthreads();
  }
  for (int64_t i = tid; i < T * E; i += kSinkhornThreads)
    cost[i] = d1[i % E] * matrix[i / E * stride + i % E] * tokens[i / E];
}

__global__ void gather_rows_kernel(In in, int64_t cols, const int64_t* index, int64_t out_rows, In weights, Out out) {
  const int64_t n = out_rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t source = index[r];
    out[i] = source < 0 ? 0.0f : (weights != nullptr ? weights[r] : 1.0f) * in[source * cols + i % cols];
  }
}

// The unweighted gather of rows of `units` 16-byte units each, input and output of one type: a
// copy (an absent source row gives zeros).
__global__ void copy_rows_kernel(const uint4* in, int64_t units, const int64_t* index, int64_t out_rows, uint4* out) {
  const int64_t n = out_rows * units;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t source = index[i / units];
    out[i] = source < 0 ? make_uint4(0, 0, 0, 0) : in[source * units + i % units];
  }
}

__global__ void gather_sum_rows_kernel(In in, int64_t cols, const int64_t* index, int64_t out_rows, int64_t k,
                                       In weights, Out out) {
  const int64_t n = out_rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / cols;
    const int64_t c = i % cols;
    float s = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t source = index[t * k + j];
      if (source >= 0) s += (weights != nullptr ? weights[source] : 1.0f) * in[source * cols + c];
    }
    out[i] = s;
  }
}

// The vector forms of the three kernels above and below, for rows of whole 8-element vectors
// (a hidden size of a multiple of 8): a token's rows are 16-byte loads, and the loads of the rows
// a thread sums are issued before any is used (an absent row, index −1, loads row 0 and adds
// nothing), as loads behind a condition on the index each wait for the one before.
__global__ void gather_rows8_kernel(In in, int64_t col_vectors, const int64_t* index, int64_t out_rows, In weights,
                                    Out out) {
  const int64_t n = out_rows * col_vectors;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = v / col_vectors;
    const int64_t source = index[r];
    float x[8];
    load8(in, (source < 0 ? 0 : source) * col_vectors + v % col_vectors, x);
    const float factor = source < 0 ? 0.0f : (weights != nullptr ? weights[r] : 1.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = source < 0 ? 0.0f : factor * x[j];
    store8(out, v, x);
  }
}

__global__ void gather_sum_rows8_kernel(In in, int64_t col_vectors, const int64_t* index, int64_t out_rows, int64_t k,
                                        In weights, Out out) {
  const int64_t n = out_rows * col_vectors;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = v / col_vectors;
    const int64_t c = v % col_vectors;
    float s[8] = {};
#pragma unroll 4
    for (int64_t j = 0; j < k; ++j) {
      const int64_t source = index[t * k + j];
      float x[8];
      load8(in, (source < 0 ? 0 : source) * col_vectors + c, x);
      const float factor = source < 0 ? 0.0f : (weights != nullptr ? weights[source] : 1.0f);
#pragma unroll
      for (int i = 0; i < 8; ++i) s[i] += source < 0 ? 0.0f : factor * x[i];
    }
    store8(out, v, s);
  }
}

// One warp per row, each lane summing 8-element vectors 32 apart.
__global__ void row_dot8_kernel(In a, In b, int64_t rows, int64_t col_vectors, Out out) {
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float s = 0.0f;
  for (int64_t c = lane; c < col_vectors; c += 32) {
    float x[8], y[8];
    load8(a, r * col_vectors + c, x);
    load8(b, r * col_vectors + c, y);
#pragma unroll
    for (int j = 0; j < 8; ++j) s += x[j] * y[j];
  }
  s = warp_sum(s);
  if (lane == 0) out[r] = s;
}

// One warp per row.
__global__ void row_dot_kernel(In a, In b, int64_t rows, int64_t cols, Out out) {
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float s = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) s += a[r * cols + c] * b[r * cols + c];
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[r] = s;
}

__global__ void scale_rows_kernel(In x, In factors, int64_t n, int64_t cols, Out out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = factors[i / cols] * x[i];
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

// score_sums' layout: the (group, expert) score sums, the z-loss's partial sums, then the
// auxiliary sums' partial sums and counts per (group, expert, chunk).
int64_t moe_route_score_doubles(const MoeRoutingParams& p) {
  const int64_t pairs = p.aux_groups * p.experts;
  return pairs + kZBlocks + (pairs > 0 ? 2 * pairs * aux_chunks(p) : 0);
}

void moe_route(const float* logits, const MoeRoutingParams& p, float* gates, float* probs, float* routing_map,
               float* aux_counts, double* statistics, bool accumulate, float* chosen, double* score_sums,
               cudaStream_t stream) {
  // The second pass of a partitioned auxiliary loss routes nothing: the score sums against the
  // given counts.
  if (!p.aux_from_counts) {
    route_rows_kernel<<<blocks_for(p.tokens), kThreads, 0, stream>>>(logits, p, gates, probs, routing_map, chosen);
    MGT_CUDA_CHECK_LAUNCH(route_rows_kernel);
  }
  if (p.capacity >= 0 && !p.aux_from_counts) {
    capacity_kernel<<<blocks_for(p.tokens * p.experts), kThreads, 0, stream>>>(p, gates, chosen, probs, routing_map);
    MGT_CUDA_CHECK_LAUNCH(capacity_kernel);
  }
  double* z_partials = score_sums + p.aux_groups * p.experts;
  if (p.aux_groups > 0) {
    // Several blocks per (group, expert): one each left most of the GPU idle, each thread walking
    // dozens of tokens.
    const int64_t chunks = aux_chunks(p);
    const int64_t blocks = p.aux_groups * p.experts * chunks;
    double* partial_sums = z_partials + kZBlocks;
    double* partial_counts = partial_sums + blocks;
    aux_partials_kernel<<<static_cast<unsigned>(blocks), kSumThreads, 0, stream>>>(logits, p, chunks, partial_sums,
                                                                                 partial_counts);
    MGT_CUDA_CHECK_LAUNCH(aux_partials_kernel);
    aux_finish_kernel<<<blocks_for(p.aux_groups * p.experts), kThreads, 0, stream>>>(p, chunks, partial_sums,
                                                                                     partial_counts, aux_counts,
                                                                                     score_sums);
    MGT_CUDA_CHECK_LAUNCH(aux_finish_kernel);
  }
  const int z_blocks = static_cast<int>(std::min<int64_t>(kZBlocks, (p.tokens + kSumThreads - 1) / kSumThreads));
  if (p.z_loss && !p.aux_from_counts && z_blocks > 0) {
    z_partials_kernel<<<static_cast<unsigned>(z_blocks), kSumThreads, 0, stream>>>(logits, p, z_partials);
    MGT_CUDA_CHECK_LAUNCH(z_partials_kernel);
  }
  statistics_kernel<<<1, 1, 0, stream>>>(p, aux_counts, score_sums, z_partials, z_blocks,
                                         p.aux_groups > 0 ? moe_math::aux_loss_factor(p) : 0.0, statistics, accumulate);
  MGT_CUDA_CHECK_LAUNCH(statistics_kernel);
}

void moe_route_backward(const float* logits, const MoeRoutingParams& p, const float* d_probs,
                        const float* routing_map, const float* aux_counts, float aux_grad, float z_grad,
                        float* d_logits, float* scratch, cudaStream_t stream) {
  const float aux_factor = p.aux_groups > 0 ? static_cast<float>(aux_grad * moe_math::aux_loss_factor(p)) : 0.0f;
  const float z_factor = p.z_loss ? z_grad / static_cast<float>(p.tokens) : 0.0f;
  route_backward_kernel<<<blocks_for(p.tokens), kThreads, 0, stream>>>(logits, p, d_probs, routing_map, aux_counts,
                                                                       aux_factor, z_factor, d_logits, scratch);
  MGT_CUDA_CHECK_LAUNCH(route_backward_kernel);
}

void moe_sinkhorn(const float* logits, int64_t tokens, int64_t experts, float* out, float* token_factors,
                  cudaStream_t stream) {
  SinkhornShape shape;
  shape.columns = 1;
  while (shape.columns < experts && shape.columns < 32) shape.columns *= 2;
  shape.groups = kSinkhornThreads / shape.columns;
  shape.stride = experts | 1;
  const std::size_t fixed = (2 * static_cast<std::size_t>(experts) + kSinkhornThreads + 1) * sizeof(float);
  const std::size_t whole = fixed + static_cast<std::size_t>(tokens * (shape.stride + 1)) * sizeof(float);
  // The matrix in shared memory up to 200 KiB (the H100's and H200's 227 KiB leave room).
  shape.in_shared = whole <= 200 * 1024;
  const std::size_t shared = shape.in_shared ? whole : fixed;
  if (shared > 48 * 1024)
    MGT_CUDA_CHECK(cudaFuncSetAttribute(sinkhorn_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
  sinkhorn_kernel<<<1, kSinkhornThreads, shared, stream>>>(logits, tokens, experts, shape, out, token_factors);
  MGT_CUDA_CHECK_LAUNCH(sinkhorn_kernel);
}

void gather_rows(In in, int64_t cols, const int64_t* index, int64_t out_rows, In weights, Out out,
                 cudaStream_t stream) {
  const int64_t row_bytes = cols * in.element_bytes();
  const bool aligned = reinterpret_cast<uintptr_t>(in.raw()) % 16 == 0 && reinterpret_cast<uintptr_t>(out.raw()) % 16 == 0;
  if (weights == nullptr && in.type() == out.type() && row_bytes % 16 == 0 && aligned) {
    const int64_t units = row_bytes / 16;
    copy_rows_kernel<<<grid_for(out_rows * units), kThreads, 0, stream>>>(static_cast<const uint4*>(in.raw()), units,
                                                                          index, out_rows, static_cast<uint4*>(out.raw()));
    MGT_CUDA_CHECK_LAUNCH(copy_rows_kernel);
    return;
  }
  if (vectorizable(cols, {in.raw(), out.raw()})) {
    gather_rows8_kernel<<<grid_for(out_rows * cols / 8), kThreads, 0, stream>>>(in, cols / 8, index, out_rows, weights,
                                                                               out);
    MGT_CUDA_CHECK_LAUNCH(gather_rows8_kernel);
    return;
  }
  gather_rows_kernel<<<grid_for(out_rows * cols), kThreads, 0, stream>>>(in, cols, index, out_rows, weights, out);
  MGT_CUDA_CHECK_LAUNCH(gather_rows_kernel);
}

void gather_sum_rows(In in, int64_t cols, const int64_t* index, int64_t out_rows, int64_t k, In weights, Out out,
                     cudaStream_t stream) {
  if (vectorizable(cols, {in.raw(), out.raw()})) {
    gather_sum_rows8_kernel<<<grid_for(out_rows * cols / 8), kThreads, 0, stream>>>(in, cols / 8, index, out_rows, k,
                                                                                   weights, out);
    MGT_CUDA_CHECK_LAUNCH(gather_sum_rows8_kernel);
    return;
  }
  gather_sum_rows_kernel<<<grid_for(out_rows * cols), kThreads, 0, stream>>>(in, cols, index, out_rows, k, weights,
                                                                             out);
  MGT_CUDA_CHECK_LAUNCH(gather_sum_rows_kernel);
}

void scale_rows(In x, In factors, int64_t rows, int64_t cols, Out out, cudaStream_t stream) {
  scale_rows_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(x, factors, rows * cols, cols, out);
  MGT_CUDA_CHECK_LAUNCH(scale_rows_kernel);
}

void row_dot(In a, In b, int64_t rows, int64_t cols, Out out, cudaStream_t stream) {
  if (vectorizable(cols, {a.raw(), b.raw()})) {
    row_dot8_kernel<<<blocks_for(rows * 32), kThreads, 0, stream>>>(a, b, rows, cols / 8, out);
    MGT_CUDA_CHECK_LAUNCH(row_dot8_kernel);
    return;
  }
  row_dot_kernel<<<blocks_for(rows * 32), kThreads, 0, stream>>>(a, b, rows, cols, out);
  MGT_CUDA_CHECK_LAUNCH(row_dot_kernel);
}

}  // namespace mgt::cuda
