// A non-owning view of elements (indices; floating-point elements have FloatView, whose type
// travels with it) in a backend's memory: host memory for the CPU backend, device
// memory for a GPU one. It deliberately has no element access (no operator[], no iterators):
// the model may only hand views to backend operations, so code written against it cannot
// accidentally dereference device memory on the host.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/float_view.hpp"

namespace mgt {

template <typename T>
class DeviceSpan {
public:
  using element_type = T;

  constexpr DeviceSpan() = default;
  constexpr DeviceSpan(T* data, int64_t size) : data_(data), size_(size) {}

  // A mutable view converts to a read-only one, never the other way round.
  template <typename U,
            typename = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  constexpr DeviceSpan(DeviceSpan<U> other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr int64_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }

  // Elements [offset, offset + count), checked.
  DeviceSpan subspan(int64_t offset, int64_t count) const {
    if (offset < 0 || count < 0 || offset > size_ || count > size_ - offset) {
      throw_device_span_range(offset, count, size_);
    }
    return DeviceSpan(data_ + offset, count);
  }
  DeviceSpan first(int64_t count) const { return subspan(0, count); }

private:
  T* data_ = nullptr;
  int64_t size_ = 0;
};

using IndexView = DeviceSpan<int64_t>;
using ConstIndexView = DeviceSpan<const int64_t>;

}  // namespace mgt
