// The two 8-bit floating-point formats of Hopper's FP8 tensor cores and the per-tensor scaling
// Transformer Engine trains with (transformer_engine/common/recipe/__init__.py):
//   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, NaN = S.1111.111;
//         largest finite 448. Activations and weights.
//   E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-style infinities and NaNs;
//         largest finite 57344. Gradients, under the hybrid format.
// A tensor x is stored as codes q = fp8(x · scale) and read back as decode(q) · scale_inv, with
// scale_inv = 1/scale recorded when q was made. The host functions below are the CPU backend's
// arithmetic and the reference for the GPU's conversions (cvt.rn.satfinite: round to nearest
// even, finite values beyond the largest saturate to it, NaN becomes the positive NaN code 0x7F).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace mgt {

enum class Fp8Format : uint8_t { kE4M3, kE5M2 };

// Which GEMM of a linear layer an FP8 GEMM is, for its accumulation as Transformer Engine sets it
// (transformer_engine/pytorch/module/base.py: _2X_ACC_FPROP False, _2X_ACC_DGRAD and
// _2X_ACC_WGRAD True): the forward's may accumulate in the tensor cores' narrower accumulator
// (cuBLASLt's fast accumulation); the gradients' move their partial sums into fp32 as they go, so
// that long sums keep their low bits, whatever the formats.
enum class Fp8GemmRole : uint8_t { kForward, kInputGradient, kWeightGradient };

// How a delayed-scaling recipe turns a tensor's amax history into its next scale
// (--fp8-amax-compute-algo).
enum class Fp8AmaxAlgo : uint8_t { kMostRecent, kMax };

std::string_view fp8_format_name(Fp8Format format);  // "e4m3" | "e5m2"

// The largest finite value: 448 or 57344.
constexpr float fp8_max(Fp8Format format) { return format == Fp8Format::kE4M3 ? 448.0f : 57344.0f; }

// The value of a code (NaN for NaN codes, ±infinity for E5M2's infinities).
float fp8_decode(uint8_t code, Fp8Format format);
// The code nearest to x, ties to the even code; finite values and infinities beyond the largest
// finite value saturate to it (with x's sign); NaN gives 0x7F. Values at or below half the
// smallest subnormal become a zero of x's sign.
uint8_t fp8_encode(float x, Fp8Format format);

// Transformer Engine's delayed-scaling update of `tensors` scales from their amax histories
// (transformer_engine/common/recipe/delayed_scaling.cu), in place. history is [history_len,
// tensors], row 0 holding each tensor's amax since the last update. For each tensor: the amax
// taken is row 0 (most recent) or the largest of the whole history (max); the history rolls one
// row towards the front (row i takes row i+1, the last row takes the old row 0) and row 0 is
// zeroed for the next amaxes; the new scale is scaled_max / amax where that amax is finite and
// positive, else the scale stays. scaled_max = fp8_max(format) · 2^−margin.
void fp8_delayed_scaling_update(std::span<float> history, std::span<float> scale, int64_t tensors,
                                int64_t history_len, Fp8AmaxAlgo algo, float scaled_max);

// scaled_max of the update above: fp8_max(format) · 2^−margin (--fp8-margin).
float fp8_scaled_max(Fp8Format format, int margin);

// Transformer Engine's current (per-tensor, "tensorwise") scale from a tensor's own amax
// (transformer_engine/common/recipe/recipe_common.cuh compute_scale_from_amax, no epsilon, no
// power-of-two rounding): fp8_max / amax, rounded to nearest; 1 where amax is 0, infinite or NaN;
// the largest finite float where the quotient overflows.
float fp8_current_scale(float amax, Fp8Format format);

}  // namespace mgt
