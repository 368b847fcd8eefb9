#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

void check(const AttentionShape& s, const AttentionParams& p, const char* name) {
  require(s.batch >= 0 && s.seq_q >= 0 && s.heads >= 0, name, "sizes must be >= 0");
  require(s.head_dim > 0, name, "head_dim must be > 0");
  require(!p.causal || s.seq_kv >= s.seq_q, name, "seq_kv must be >= seq_q under the causal mask");
  require(s.groups > 0 && s.heads % s.groups == 0, name, "groups must divide heads");
  require(p.dropout_p >= 0.0f && p.dropout_p < 1.0f, name, "dropout_p must be in [0, 1)");
  require(p.dropout_first_head >= 0 &&
              p.dropout_first_head + s.heads <= (p.dropout_heads > 0 ? p.dropout_heads : s.heads),
          name, "dropout heads [first, first + heads) must lie within dropout_heads");
  require(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.0f, name,
          "softmax_scale must be > 0");
}

// The last key index query i may see.
int64_t last_visible(const AttentionShape& s, const AttentionParams& p, int64_t i) {
  return attention_visible_end(s, p, i) - 1;
}

// Where the rows of one (batch, head) pair start in q/out and in k/v, and their strides.
struct HeadSlices {
  int64_t q_offset, kv_offset, q_stride, kv_stride;
};

HeadSlices slices(const AttentionShape& s, int64_t b, int64_t h) {
  const HeadTensor qt = s.query();
  const HeadTensor kvt = s.key_value();
  const int64_t group = h / (s.heads / s.groups);
  return {qt.offset(0, b, h), kvt.offset(0, b, group), qt.seq_stride(), kvt.seq_stride()};
}

DropoutKey row_key(const AttentionShape& s, const AttentionParams& p, int64_t b, int64_t h,
                   int64_t i) {
  DropoutKey key = p.dropout_key;
  const int64_t heads = p.dropout_heads > 0 ? p.dropout_heads : s.heads;
  key.offset +=
      static_cast<uint64_t>(((b * heads + p.dropout_first_head + h) * s.seq_q + i) * s.seq_kv);
  return key;
}

// probs[seq_q, seq_kv] = exp(scale·Q·Kᵀ − lse) under the causal mask (zeros above it): the
// softmax rebuilt from the saved normalisers instead of kept from the forward.
void probabilities(const float* q, const float* k, const HeadSlices& hs, const AttentionShape& s,
                   const AttentionParams& p, const float* lse_row, float* probs) {
  gemm(Trans::kNo, Trans::kYes, s.seq_q, s.seq_kv, s.head_dim, p.softmax_scale, q + hs.q_offset, hs.q_stride,
       k + hs.kv_offset, hs.kv_stride, 0.0f, probs, s.seq_kv);
  for (int64_t i = 0; i < s.seq_q; ++i) {
    float* row = probs + i * s.seq_kv;
    const int64_t last = last_visible(s, p, i);
    for (int64_t j = 0; j <= last; ++j) row[j] = std::exp(row[j] - lse_row[i]);
    std::fill(row + last + 1, row + s.seq_kv, 0.0f);
  }
}

}  // namespace

void attention_forward(const float* q, const float* k, const float* v, const AttentionShape& shape,
                       const AttentionParams& params, float* out, float* lse, int64_t first_pair,
                       int64_t end_pair) {
  check(shape, params, "attention_forward");
  const AttentionShape& s = shape;
  if (s.seq_q == 0) return;
  const float keep_scale = 1.0f / (1.0f - params.dropout_p);
  std::vector<float> probs(static_cast<size_t>(s.seq_q * s.seq_kv));
  std::vector<uint8_t> keep(static_cast<size_t>(s.seq_kv));

  if (end_pair < 0) end_pair = s.batch * s.heads;
  for (int64_t pair = first_pair; pair < end_pair; ++pair) {
    const int64_t b = pair / s.heads;
    const int64_t h = pair % s.heads;
    {
      const HeadSlices hs = slices(s, b, h);
      float* lse_row = lse + (b * s.heads + h) * s.seq_q;
      gemm(Trans::kNo, Trans::kYes, s.seq_q, s.seq_kv, s.head_dim, params.softmax_scale,
           q + hs.q_offset, hs.q_stride, k + hs.kv_offset, hs.kv_stride, 0.0f, probs.data(),
           s.seq_kv);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        float* row = probs.data() + i * s.seq_kv;
        const int64_t last = last_visible(s, params, i);
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j <= last; ++j) max = std::max(max, row[j]);
        double sum = 0.0;
        for (int64_t j = 0; j <= last; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        const auto inv_sum = static_cast<float>(1.0 / sum);
        lse_row[i] = max + static_cast<float>(std::log(sum));
        for (int64_t j = 0; j <= last; ++j) row[j] *= inv_sum;
        std::fill(row + last + 1, row + s.seq_kv, 0.0f);
        if (params.dropout_p > 0.0f) {
          // Masked-out columns are zero already, so only the visible prefix needs a draw.
          dropout_keep_mask(row_key(s, params, b, h, i), params.dropout_p, last + 1, keep.data());
          for (int64_t j = 0; j <= last; ++j) {
            row[j] = keep[static_cast<size_t>(j)] ? row[j] * keep_scale : 0.0f;
          }
        }
      }
      gemm(Trans::kNo, Trans::kNo, s.seq_q, s.head_dim, s.seq_kv, 1.0f, probs.data(), s.seq_kv,
           v + hs.kv_offset, hs.kv_stride, 0.0f, out + hs.q_offset, hs.q_stride);
    }
  }
}

void attention_backward(const float* q, const float* k, const float* v, const float* out,
                        const float* dout, const float* lse, const AttentionShape& shape,
                        const AttentionParams& params, float* dq, float* dk, float* dv,
                        int64_t first_pair, int64_t end_pair) {
  check(shape, params, "attention_backward");
  const AttentionShape& s = shape;
  const float keep_scale = 1.0f / (1.0f - params.dropout_p);
  std::vector<float> probs(static_cast<size_t>(s.seq_q * s.seq_kv));
  std::vector<float> dprobs(probs.size());
  std::vector<uint8_t> keep(static_cast<size_t>(s.seq_kv));

  // Heads of one group add into the same dk/dv rows, so a range owns whole groups: it zeroes
  // their rows, then adds its heads in order.
  if (end_pair < 0) end_pair = s.batch * s.groups;
  const HeadTensor kv = s.key_value();
  for (int64_t pair = first_pair; pair < end_pair; ++pair) {
    for (int64_t t = 0; t < s.seq_kv; ++t) {
      const int64_t at = kv.offset(t, pair / s.groups, pair % s.groups);
      std::fill(dk + at, dk + at + s.head_dim, 0.0f);
      std::fill(dv + at, dv + at + s.head_dim, 0.0f);
    }
  }
  if (s.seq_q == 0) return;

  const int64_t heads_per_group = s.heads / s.groups;
  for (int64_t pair = first_pair; pair < end_pair; ++pair) {
    const int64_t b = pair / s.groups;
    for (int64_t h = (pair % s.groups) * heads_per_group; h < (pair % s.groups + 1) * heads_per_group; ++h) {
      const HeadSlices hs = slices(s, b, h);
      const float* lse_row = lse + (b * s.heads + h) * s.seq_q;
      probabilities(q, k, hs, s, params, lse_row, probs.data());
      // dprobs = dO·Vᵀ, the gradient with respect to the dropped-out probabilities.
      gemm(Trans::kNo, Trans::kYes, s.seq_q, s.seq_kv, s.head_dim, 1.0f, dout + hs.q_offset,
           hs.q_stride, v + hs.kv_offset, hs.kv_stride, 0.0f, dprobs.data(), s.seq_kv);

      for (int64_t i = 0; i < s.seq_q; ++i) {
        float* p = probs.data() + i * s.seq_kv;
        float* dp = dprobs.data() + i * s.seq_kv;
        const int64_t last = last_visible(s, params, i);
        if (params.dropout_p > 0.0f) {
          dropout_keep_mask(row_key(s, params, b, h, i), params.dropout_p, last + 1, keep.data());
        }
        // Σ_j P_ij·dP_ij equals dO_i·O_i even with dropout (O_i = Σ_j P_ij·mask_ij/(1−p)·V_j);
        // the dot product is the cheaper of the two.
        const float* o_row = out + hs.q_offset + i * hs.q_stride;
        const float* do_row = dout + hs.q_offset + i * hs.q_stride;
        double delta = 0.0;
        for (int64_t d = 0; d < s.head_dim; ++d) delta += static_cast<double>(o_row[d]) * do_row[d];
        const auto delta_f = static_cast<float>(delta);
        for (int64_t j = 0; j <= last; ++j) {
          float factor = 1.0f;
          if (params.dropout_p > 0.0f) factor = keep[static_cast<size_t>(j)] ? keep_scale : 0.0f;
          const float prob = p[j];
          // dS = P ⊙ (dP − Δ), where dP is the gradient of the probabilities before dropout.
          const float dscore = prob * (dp[j] * factor - delta_f);
          p[j] = prob * factor;  // now the dropped-out probabilities, for dV
          dp[j] = dscore;
        }
        std::fill(dp + last + 1, dp + s.seq_kv, 0.0f);
      }
      const float* dscores = dprobs.data();
      // dV_g += P_dropᵀ·dO; dQ = scale·dS·K; dK_g += scale·dSᵀ·Q.
      gemm(Trans::kYes, Trans::kNo, s.seq_kv, s.head_dim, s.seq_q, 1.0f, probs.data(), s.seq_kv,
           dout + hs.q_offset, hs.q_stride, 1.0f, dv + hs.kv_offset, hs.kv_stride);
      gemm(Trans::kNo, Trans::kNo, s.seq_q, s.head_dim, s.seq_kv, params.softmax_scale, dscores,
           s.seq_kv, k + hs.kv_offset, hs.kv_stride, 0.0f, dq + hs.q_offset, hs.q_stride);
      gemm(Trans::kYes, Trans::kNo, s.seq_kv, s.head_dim, s.seq_q, params.softmax_scale, dscores,
           s.seq_kv, q + hs.q_offset, hs.q_stride, 1.0f, dk + hs.kv_offset, hs.kv_stride);
    }
  }
}

}  // namespace mgt::cpu
