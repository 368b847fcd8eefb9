// What the files of GptModel (gpt_model.cpp, gpt_model_decoding.cpp,
// gpt_model_pipeline_stages.cpp) share: the prefix of their errors, the checks of the host arrays
// they are given, the data loader's layout to the activations', and the loss gradient's factor.
// Private to lib/model.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "model/gpt_model.hpp"

namespace mgt::gpt_model_internal {

inline void require(bool ok, const std::string& message) {
  if (!ok) throw Error("GptModel: " + message);
}

// Checks a [b, s] host array's size and, for ids, their range [0, limit).
template <typename T>
void check_input(std::span<const T> values, int64_t expected, const char* name, int64_t limit) {
  require(static_cast<int64_t>(values.size()) == expected,
          std::string(name) + " has " + std::to_string(values.size()) + " elements, expected " +
              std::to_string(expected) + " (batch × sequence)");
  if constexpr (std::is_integral_v<T>) {
    // The message is built only for a bad value: building it for each of a micro-batch's
    // tokens took milliseconds of host time per micro-batch, with the GPU idle.
    for (const T v : values) {
      if (v < 0 || v >= limit) {
        throw Error("GptModel: " + std::string(name) + " holds " + std::to_string(v) + ", outside [0, " +
                    std::to_string(limit) + ")");
      }
    }
  }
}

// [b, s, inner] batch-major → [s, b, inner] sequence-major (and back, with b and s swapped):
// the data loader's layout to Megatron's activation layout.
template <typename T>
std::vector<T> transpose_01(std::span<const T> x, int64_t rows, int64_t cols, int64_t inner) {
  std::vector<T> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const T* src = x.data() + (r * cols + c) * inner;
      T* dst = out.data() + (c * rows + r) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i];
    }
  }
  return out;
}

// The factor of the loss gradient: loss_scale / (tokens · micro-batches), 0 for a micro-batch
// without tokens (Megatron would divide by zero), or loss_scale for the plain sum. A power-of-two
// loss scale only moves the exponent: the factor is loss_scale × the unscaled factor, exactly.
inline float loss_gradient_scale(const MaskedLossSum& sum, int64_t num_microbatches, LossReduction reduction,
                                 float loss_scale) {
  if (reduction == LossReduction::kSum) return loss_scale;
  const double denominator = sum.tokens * static_cast<double>(num_microbatches);
  return sum.tokens > 0.0 ? static_cast<float>(static_cast<double>(loss_scale) / denominator) : 0.0f;
}


}  // namespace mgt::gpt_model_internal
