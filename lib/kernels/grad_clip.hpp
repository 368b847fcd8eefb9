// Global gradient-norm clipping as Megatron does it (megatron/core/optimizer/clip_grads.py): one
// common scale factor max_norm / (norm + 1e-6) for every gradient, applied when it is < 1. The
// norm itself comes from Backend::sum_of_squares, all-reduced over the model-parallel ranks.
#pragma once

namespace mgt {

// max_norm / (total_norm + 1e-6) when that is below 1, else 1 (no clipping). A max_norm of 0
// disables clipping (--clip-grad 0).
double clip_coefficient(double total_norm, double max_norm);

}  // namespace mgt
