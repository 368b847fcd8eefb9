// The operation graphs of cuDNN's backend API, built from owned descriptors: tensors (bound by a
// variant pack, by value, or virtual), pointwise operations, matmuls, reductions, reshapes and
// Bernoulli draws, finalised into one operation graph. Used by the fused attention's graphs
// (cudnn_attention_graphs.hpp); included only by code built with cuDNN (MGT_HAVE_CUDNN).
#pragma once
#include <cudnn_graph.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cudnn_check.hpp"

namespace mgt::cuda::cudnn {

// [batch, heads, rows, cols], cuDNN's order of a tensor's dimensions and strides.
using Dims = std::array<int64_t, 4>;

// The byte alignment every tensor of a graph promises (and the attention's lse must have).
constexpr int64_t kAlignment = 16;

// An owned backend descriptor.
class Descriptor {
public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    MGT_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(other.d_, nullptr);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  // Names the attribute in the error, which the call alone would not.
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values) {
    const cudnnStatus_t status = cudnnBackendSetAttribute(d_, name, type, count, values);
    if (status != CUDNN_STATUS_SUCCESS) {
      const std::string call = "cudnnBackendSetAttribute(attribute " + std::to_string(name) + ")";
      throw_cuda_error(call.c_str(), cudnn_status_text(status).c_str(), __FILE__, __LINE__);
    }
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, T value) {
    set(name, type, 1, &value);
  }
  void finalize() { MGT_CUDNN_CHECK(cudnnBackendFinalize(d_)); }

private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Collects tensors and operations, then finalises them into an operation graph.
class GraphBuilder {
public:
  static constexpr int64_t kNone = -1;
  // The ids of virtual tensors start here: the tensors a variant pack binds take the ids below.
  static constexpr int64_t kFirstVirtual = 100;

  // A tensor bound in the variant pack (by device address).
  int64_t io(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type) {
    return add(uid, dims, strides, type, false, false);
  }
  // A [1, 1, 1, 1] fp32 scalar bound by host address, read when the plan is launched.
  int64_t scalar(int64_t uid) {
    return add(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  }
  // An intermediate tensor that never reaches memory.
  int64_t temp(const Dims& dims, const Dims& strides, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return add(next_virtual_++, dims, strides, type, true, false);
  }
  int64_t temp_like(int64_t like, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    const Shape& s = shapes_.at(like);
    return temp(s.dims, s.strides, type);
  }

  // y = mode(x[, b[, t]]); math in `precision`; axis for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t, int64_t y,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = kNone);
  void unary(cudnnPointwiseMode_t mode, int64_t x, int64_t y) { pointwise(mode, x, kNone, kNone, y); }
  void binary(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t y) {
    pointwise(mode, x, b, kNone, y);
  }

  // c = a·b over the last two dimensions, batched (and broadcast over heads) over the first two.
  void matmul(int64_t a, int64_t b, int64_t c);

  // y = reduce(x) over the dimensions where y has extent 1.
  void reduction(cudnnReduceTensorOp_t mode, int64_t x, int64_t y);

  // y = x seen with y's dimensions and strides (a transpose of the last two, here).
  void reshape(int64_t x, int64_t y);

  // y = 1 with probability keep, else 0, from the Philox stream of (seed, offset).
  void bernoulli(double keep, int64_t seed, int64_t offset, int64_t y);

  // The finalised operation graph; `keep` receives every descriptor it refers to.
  Descriptor finish(cudnnHandle_t handle, std::vector<Descriptor>& keep);

private:
  struct Shape {
    Dims dims;
    Dims strides;
  };

  int64_t add(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type,
              bool is_virtual, bool by_value);

  std::map<int64_t, Descriptor> tensors_;
  std::map<int64_t, Shape> shapes_;
  std::vector<Descriptor> parts_;  // pointwise, matmul, reduction and RNG descriptors
  std::vector<Descriptor> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

}  // namespace mgt::cuda::cudnn
