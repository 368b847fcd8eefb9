// Dropout with masks drawn from Philox4x32-10, so that a mask is a pure function of its key and
// never has to be stored: the backward (and a resumed run) regenerates it.
//
// The stream, precisely (a CUDA implementation must follow it bit for bit):
//   element i of a call has global index j = key.offset + i;
//   block b = j / 4, lane = j % 4;
//   word = philox4x32_10(counter = {lo32(b), hi32(b), lo32(key.stream), hi32(key.stream)},
//                        key = {lo32(key.seed), hi32(key.seed)})[lane];
//   u = (word >> 8) · 2⁻²⁴ ∈ [0, 1); the element is kept iff u >= p, and scaled by 1/(1 − p).
// Because the index is global, a shard of a tensor called with offset + (its first element's
// index) draws exactly the slice of the unsharded mask.
#pragma once
#include <cstdint>

#include "kernels/operation_params.hpp"

namespace mgt::cpu {

// keep[n] = 1 where element key.offset + i survives, else 0.
void dropout_keep_mask(DropoutKey key, float p, int64_t n, uint8_t* keep);

// y[n] = x · keep / (1 − p). p must be in [0, 1); p == 0 copies. y may alias x.
void dropout_forward(const float* x, int64_t n, float p, DropoutKey key, float* y);

// dx[n] = dy · keep / (1 − p), with keep regenerated from the same key. dx may alias dy.
void dropout_backward(const float* dy, int64_t n, float p, DropoutKey key, float* dx);

// y[n] = x · (1 − eps + 2·eps·u), u = (word >> 8) · 2⁻²⁴ of element key.offset + i's word in the
// stream above: multiplicative uniform noise (the MoE router's input jitter). y may alias x.
void uniform_jitter(const float* x, int64_t n, float eps, DropoutKey key, float* y);

// y[n] = standard normal draws by Box–Muller from the stream above: element j = key.offset + i
// takes block j / 4's words w[2·p] and w[2·p + 1], p = (j % 4) / 2, as u1 = ((w[2p] >> 8) + 1)·2⁻²⁴
// ∈ (0, 1] and u2 = (w[2p + 1] >> 8)·2⁻²⁴, and is √(−2 ln u1) · cos(2π u2) for an even j, the sine
// for an odd one (computed in double, rounded once).
void standard_normal(int64_t n, DropoutKey key, float* y);

}  // namespace mgt::cpu
