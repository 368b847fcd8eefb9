// A kernel's floating-point operand: fp32 or bf16 elements, read and written as float (bf16
// rounded to nearest even on store). Built on the host from a FloatView; the type is uniform
// across a launch, so the branch per access costs nothing next to the memory access, and one
// kernel serves both types without a template instance per type combination.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/float_view.hpp"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#define MGT_HOST_DEVICE __host__ __device__
#else
#define MGT_HOST_DEVICE
#endif

namespace mgt::cuda {

class In {
public:
  In() = default;
  In(ConstFloatView v) : p_(v.raw()), bf16_(v.type() == FloatType::kBf16) {}
  In(FloatView v) : p_(v.raw()), bf16_(v.type() == FloatType::kBf16) {}
  MGT_HOST_DEVICE In(const float* p) : p_(p) {}
  MGT_HOST_DEVICE In operator+(int64_t n) const {
    return In(static_cast<const char*>(p_) + n * (bf16_ ? 2 : 4), bf16_);
  }
  MGT_HOST_DEVICE bool operator==(std::nullptr_t) const { return p_ == nullptr; }
  MGT_HOST_DEVICE bool operator!=(std::nullptr_t) const { return p_ != nullptr; }
  MGT_HOST_DEVICE bool bf16() const { return bf16_; }
  MGT_HOST_DEVICE const void* raw() const { return p_; }
#ifdef __CUDACC__
  __device__ float operator[](int64_t i) const {
    return bf16_ ? __bfloat162float(static_cast<const __nv_bfloat16*>(p_)[i])
                 : static_cast<const float*>(p_)[i];
  }
#endif

private:
  MGT_HOST_DEVICE In(const void* p, bool bf16) : p_(p), bf16_(bf16) {}
  const void* p_ = nullptr;
  bool bf16_ = false;
};

class Out {
public:
  Out() = default;
  Out(FloatView v) : p_(v.raw()), bf16_(v.type() == FloatType::kBf16) {}
  MGT_HOST_DEVICE Out(float* p) : p_(p) {}
  MGT_HOST_DEVICE Out(void* p, bool bf16) : p_(p), bf16_(bf16) {}
  MGT_HOST_DEVICE Out operator+(int64_t n) const {
    return Out(static_cast<char*>(p_) + n * (bf16_ ? 2 : 4), bf16_);
  }
  MGT_HOST_DEVICE bool operator==(std::nullptr_t) const { return p_ == nullptr; }
  MGT_HOST_DEVICE bool operator!=(std::nullptr_t) const { return p_ != nullptr; }
  MGT_HOST_DEVICE bool bf16() const { return bf16_; }
  MGT_HOST_DEVICE void* raw() const { return p_; }
#ifdef __CUDACC__
  // One element, read as float and assigned from float.
  class Ref {
  public:
    __device__ Ref(void* p, bool bf16, int64_t i) : p_(p), bf16_(bf16), i_(i) {}
    __device__ operator float() const {
      return bf16_ ? __bfloat162float(static_cast<const __nv_bfloat16*>(p_)[i_])
                   : static_cast<const float*>(p_)[i_];
    }
    __device__ Ref& operator=(float v) {
      if (bf16_) static_cast<__nv_bfloat16*>(p_)[i_] = __float2bfloat16_rn(v);
      else static_cast<float*>(p_)[i_] = v;
      return *this;
    }
    __device__ Ref& operator=(const Ref& other) { return *this = static_cast<float>(other); }
    __device__ Ref& operator+=(float v) { return *this = static_cast<float>(*this) + v; }
    __device__ Ref& operator*=(float v) { return *this = static_cast<float>(*this) * v; }

  private:
    void* p_;
    bool bf16_;
    int64_t i_;
  };
  __device__ Ref operator[](int64_t i) const { return Ref(p_, bf16_, i); }
#endif

private:
  void* p_ = nullptr;
  bool bf16_ = false;
};

}  // namespace mgt::cuda
