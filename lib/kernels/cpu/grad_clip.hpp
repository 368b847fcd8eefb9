// Global gradient-norm clipping as Megatron does it (clip_grads.py): the L2 norm over all
// gradient buffers, then one common scale factor max_norm / (norm + 1e-6) applied when it is < 1.
// The sum of squares is returned separately so that model-parallel ranks can all-reduce it before
// taking the square root.
#pragma once
#include <span>

namespace mgt::cpu {

// Σ x² over every element of every buffer, accumulated in double.
double sum_of_squares(std::span<const std::span<const float>> buffers);

// √(sum_of_squares) for a single rank.
double global_l2_norm(std::span<const std::span<const float>> buffers);

// max_norm / (total_norm + 1e-6) when that is below 1, else 1 (no clipping). A max_norm of 0
// disables clipping (--clip-grad 0).
double clip_coefficient(double total_norm, double max_norm);

// Every element of every buffer *= coefficient.
void scale_buffers(std::span<const std::span<float>> buffers, float coefficient);

}  // namespace mgt::cpu
