// Global gradient-norm clipping as Megatron does it (clip_grads.py) on host buffers: the L2 norm
// over all gradient buffers, then one common scale factor (kernels/grad_clip.hpp's
// clip_coefficient) applied when it is < 1.
// The sum of squares is returned separately so that model-parallel ranks can all-reduce it before
// taking the square root.
#pragma once
#include <span>

namespace mgt::cpu {

// Σ x² over every element of every buffer, accumulated in double.
double sum_of_squares(std::span<const std::span<const float>> buffers);

// √(sum_of_squares) for a single rank.
double global_l2_norm(std::span<const std::span<const float>> buffers);

// Every element of every buffer *= coefficient.
void scale_buffers(std::span<const std::span<float>> buffers, float coefficient);

}  // namespace mgt::cpu
