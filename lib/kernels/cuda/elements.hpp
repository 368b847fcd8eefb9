// A kernel's floating-point operand: fp32, bf16 or fp16 elements, read and written as float
// (bf16 and fp16 rounded to nearest even on store). Built on the host from a FloatView; the type is
// uniform across a launch, so the branch per access costs nothing next to the memory access, and
// one kernel serves every type without a template instance per type combination.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/float_view.hpp"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define MGT_HOST_DEVICE __host__ __device__
#else
#define MGT_HOST_DEVICE
#endif

namespace mgt::cuda {

#ifdef __CUDACC__
// The two 2-byte types share one load or store and differ only in a conversion of a few
// instructions, chosen without a branch: the kernels keep the code size and speed of a two-way
// (fp32 or 2-byte) choice.
__device__ __forceinline__ float narrow_to_float(unsigned short bits, bool bf16) {
  const float from_bf16 = __uint_as_float(static_cast<unsigned>(bits) << 16);
  const float from_half = __half2float(__ushort_as_half(bits));
  return bf16 ? from_bf16 : from_half;
}

__device__ __forceinline__ unsigned short float_to_narrow(float v, bool bf16) {
  const unsigned short to_bf16 = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  const unsigned short to_half = __half_as_ushort(__float2half_rn(v));
  return bf16 ? to_bf16 : to_half;
}

__device__ __forceinline__ float load_element(const void* p, FloatType type, int64_t i) {
  if (type == FloatType::kF32) return static_cast<const float*>(p)[i];
  return narrow_to_float(static_cast<const unsigned short*>(p)[i], type == FloatType::kBf16);
}

__device__ __forceinline__ void store_element(void* p, FloatType type, int64_t i, float v) {
  if (type == FloatType::kF32) static_cast<float*>(p)[i] = v;
  else static_cast<unsigned short*>(p)[i] = float_to_narrow(v, type == FloatType::kBf16);
}
#endif

class In {
public:
  In() = default;
  In(ConstFloatView v) : p_(v.raw()), type_(v.type()) {}
  In(FloatView v) : p_(v.raw()), type_(v.type()) {}
  MGT_HOST_DEVICE In(const float* p) : p_(p) {}
  MGT_HOST_DEVICE In(const void* p, FloatType type) : p_(p), type_(type) {}
  MGT_HOST_DEVICE In operator+(int64_t n) const {
    return In(static_cast<const char*>(p_) + n * element_bytes(), type_);
  }
  MGT_HOST_DEVICE bool operator==(std::nullptr_t) const { return p_ == nullptr; }
  MGT_HOST_DEVICE bool operator!=(std::nullptr_t) const { return p_ != nullptr; }
  MGT_HOST_DEVICE FloatType type() const { return type_; }
  MGT_HOST_DEVICE bool bf16() const { return type_ == FloatType::kBf16; }
  // bf16 or fp16: two bytes per element.
  MGT_HOST_DEVICE bool narrow() const { return type_ != FloatType::kF32; }
  MGT_HOST_DEVICE int64_t element_bytes() const { return type_ == FloatType::kF32 ? 4 : 2; }
  MGT_HOST_DEVICE const void* raw() const { return p_; }
#ifdef __CUDACC__
  __device__ float operator[](int64_t i) const { return load_element(p_, type_, i); }
#endif

private:
  const void* p_ = nullptr;
  FloatType type_ = FloatType::kF32;
};

class Out {
public:
  Out() = default;
  Out(FloatView v) : p_(v.raw()), type_(v.type()) {}
  MGT_HOST_DEVICE Out(float* p) : p_(p) {}
  MGT_HOST_DEVICE Out(void* p, FloatType type) : p_(p), type_(type) {}
  MGT_HOST_DEVICE Out operator+(int64_t n) const {
    return Out(static_cast<char*>(p_) + n * element_bytes(), type_);
  }
  MGT_HOST_DEVICE bool operator==(std::nullptr_t) const { return p_ == nullptr; }
  MGT_HOST_DEVICE bool operator!=(std::nullptr_t) const { return p_ != nullptr; }
  MGT_HOST_DEVICE FloatType type() const { return type_; }
  MGT_HOST_DEVICE bool bf16() const { return type_ == FloatType::kBf16; }
  MGT_HOST_DEVICE bool narrow() const { return type_ != FloatType::kF32; }
  MGT_HOST_DEVICE int64_t element_bytes() const { return type_ == FloatType::kF32 ? 4 : 2; }
  MGT_HOST_DEVICE void* raw() const { return p_; }
#ifdef __CUDACC__
  // One element, read as float and assigned from float.
  class Ref {
  public:
    __device__ Ref(void* p, FloatType type, int64_t i) : p_(p), type_(type), i_(i) {}
    __device__ operator float() const { return load_element(p_, type_, i_); }
    __device__ Ref& operator=(float v) {
      store_element(p_, type_, i_, v);
      return *this;
    }
    __device__ Ref& operator=(const Ref& other) { return *this = static_cast<float>(other); }
    __device__ Ref& operator+=(float v) { return *this = static_cast<float>(*this) + v; }
    __device__ Ref& operator*=(float v) { return *this = static_cast<float>(*this) * v; }

  private:
    void* p_;
    FloatType type_;
    int64_t i_;
  };
  __device__ Ref operator[](int64_t i) const { return Ref(p_, type_, i); }
#endif

private:
  void* p_ = nullptr;
  FloatType type_ = FloatType::kF32;
};

}  // namespace mgt::cuda
