// How a model trains in FP8: Megatron's --fp8-* flags as Transformer Engine's recipes read them
// (megatron/core/fp8_utils.py get_fp8_recipe: DelayedScaling for "delayed",
// Float8CurrentScaling for "tensorwise"). The four linear layers of each transformer layer
// (linear_qkv, linear_proj, linear_fc1, linear_fc2) compute in FP8; the embedding, attention,
// norms, activations and output layer stay in the model's bf16/fp16 precision, as with TE.
#pragma once
#include <cstdint>

#include "kernels/fp8.hpp"

namespace mgt {

struct Fp8Recipe {
  Fp8Format forward_format = Fp8Format::kE4M3;   // activations and weights
  Fp8Format backward_format = Fp8Format::kE4M3;  // output gradients: E5M2 under --fp8-format hybrid
  // --fp8-recipe tensorwise: each tensor scaled by its own amax at the cast (current scaling);
  // delayed: by its amax history (the rest of the fields).
  bool current_scaling = false;
  int margin = 0;                  // --fp8-margin
  int64_t amax_history_len = 1;    // --fp8-amax-history-len
  Fp8AmaxAlgo amax_compute_algo = Fp8AmaxAlgo::kMostRecent;  // --fp8-amax-compute-algo
  bool wgrad = true;               // --no-fp8-wgrad clears it: weight gradients in bf16/fp16
  // --first-last-layers-bf16: this many layers at each end of the model stay out of FP8.
  int64_t bf16_layers_at_start = 0;
  int64_t bf16_layers_at_end = 0;
  // A norm whose output only an FP8 linear layer reads casts it itself, without writing it
  // (model/norm_fp8_cast.hpp); --no-fp8-norm-casts clears it. It saves activation memory, and on
  // an H200 a little time (BENCHMARKS.md).
  bool norm_casts = true;

  // Whether transformer layer `layer` (global, 0-based) of a num_layers model computes in FP8.
  bool layer_in_fp8(int64_t layer, int64_t num_layers) const {
    return layer >= bf16_layers_at_start && layer < num_layers - bf16_layers_at_end;
  }
};

}  // namespace mgt
