#include "kernels/cpu/dropout.hpp"

#include <cmath>
#include <numbers>

#include "kernels/philox.hpp"
#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

// u >= p with u = w·2⁻²⁴ (w = word >> 8, an integer) is exactly w >= ceil(p·2²⁴).
uint32_t keep_threshold(float p) {
  return static_cast<uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
}

void check(float p, int64_t n, const char* name) {
  require_nonnegative(n, name, "n");
  require(p >= 0.0f && p < 1.0f, name, "dropout probability must be in [0, 1)");
}

// Calls visit(i, words, lane) for i in [0, n) with its Philox block's four words and its lane in
// them, one Philox evaluation per four elements.
template <typename Visit>
void for_each_block_lane(DropoutKey key, int64_t n, Visit visit) {
  int64_t i = 0;
  while (i < n) {
    const uint64_t j = key.offset + static_cast<uint64_t>(i);
    const PhiloxCounter words = philox_stream_block(key.seed, key.stream, j / 4);
    for (auto lane = static_cast<std::size_t>(j % 4); lane < 4 && i < n; ++lane, ++i) visit(i, words, lane);
  }
}

// Calls visit(i, w) for i in [0, n) with w = the element's word >> 8.
template <typename Visit>
void for_each_word(DropoutKey key, int64_t n, Visit visit) {
  for_each_block_lane(key, n, [&](int64_t i, const PhiloxCounter& words, std::size_t lane) { visit(i, words[lane] >> 8); });
}

// Calls visit(i, kept) for i in [0, n).
template <typename Visit>
void for_each_keep(DropoutKey key, float p, int64_t n, Visit visit) {
  const uint32_t threshold = keep_threshold(p);
  for_each_word(key, n, [&](int64_t i, uint32_t w) { visit(i, w >= threshold); });
}

void apply(const float* in, int64_t n, float p, DropoutKey key, float* out, const char* name) {
  check(p, n, name);
  if (p == 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for_each_keep(key, p, n, [&](int64_t i, bool kept) { out[i] = kept ? in[i] * scale : 0.0f; });
}

}  // namespace

void dropout_keep_mask(DropoutKey key, float p, int64_t n, uint8_t* keep) {
  check(p, n, "dropout_keep_mask");
  for_each_keep(key, p, n, [&](int64_t i, bool kept) { keep[i] = kept ? 1 : 0; });
}

void dropout_forward(const float* x, int64_t n, float p, DropoutKey key, float* y) {
  apply(x, n, p, key, y, "dropout_forward");
}

void dropout_backward(const float* dy, int64_t n, float p, DropoutKey key, float* dx) {
  apply(dy, n, p, key, dx, "dropout_backward");
}

void standard_normal(int64_t n, DropoutKey key, float* y) {
  require_nonnegative(n, "standard_normal", "n");
  for_each_block_lane(key, n, [&](int64_t i, const PhiloxCounter& words, std::size_t lane) {
    const std::size_t pair = lane & 2;
    const double u1 = (static_cast<double>(words[pair] >> 8) + 1.0) * 0x1p-24;
    const double u2 = static_cast<double>(words[pair + 1] >> 8) * 0x1p-24;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    y[i] = static_cast<float>(radius * ((lane & 1) != 0 ? std::sin(angle) : std::cos(angle)));
  });
}

void uniform_jitter(const float* x, int64_t n, float eps, DropoutKey key, float* y) {
  require_nonnegative(n, "uniform_jitter", "n");
  require(eps >= 0.0f && eps < 1.0f, "uniform_jitter", "eps must be in [0, 1)");
  const float low = 1.0f - eps;
  const float width = 2.0f * eps;
  for_each_word(key, n, [&](int64_t i, uint32_t w) {
    y[i] = x[i] * (low + width * (static_cast<float>(w) * 0x1p-24f));
  });
}

}  // namespace mgt::cpu
