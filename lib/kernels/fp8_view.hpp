// FP8 operands of the backend's FP8 operations (Backend::fp8_quantize, fp8_linear): a tensor's
// codes in backend memory, their format, and the one fp32 factor (1/scale at the time the codes
// were made) that turns a code's value back into the tensor's. The factor lives in backend memory
// too, so that scales computed on a GPU never travel to the host.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/device_span.hpp"
#include "kernels/float_view.hpp"
#include "kernels/fp8.hpp"

namespace mgt {

template <bool Const>
struct Fp8Span {
  using Code = std::conditional_t<Const, const uint8_t, uint8_t>;
  DeviceSpan<Code> codes;
  Fp8Format format = Fp8Format::kE4M3;
  FloatSpan<Const> scale_inv;  // one fp32 element

  constexpr Fp8Span() = default;
  constexpr Fp8Span(DeviceSpan<Code> c, Fp8Format f, FloatSpan<Const> s) : codes(c), format(f), scale_inv(s) {}
  // A mutable view converts to a read-only one.
  template <bool C, typename = std::enable_if_t<Const && !C>>
  constexpr Fp8Span(const Fp8Span<C>& other) : codes(other.codes), format(other.format), scale_inv(other.scale_inv) {}

  constexpr bool empty() const { return codes.empty(); }
};

using Fp8View = Fp8Span<false>;
using ConstFp8View = Fp8Span<true>;

// How Backend::fp8_quantize chooses the scale of the tensor it casts.
struct Fp8Scaling {
  // Delayed scaling (Transformer Engine's DelayedScaling): `scale` [1] is read; where `amax` [1]
  // is given, it becomes max(amax, max |x|) — the tensor's entry in row 0 of its amax history.
  // Current scaling (Float8CurrentScaling, Megatron's --fp8-recipe tensorwise): `amax` [1] is
  // overwritten with max |x| and `scale` [1] with fp8_current_scale(amax), used at once.
  FloatView scale;
  FloatView amax;
  bool current = false;
};

}  // namespace mgt
