// A non-owning view of floating-point elements in a backend's memory whose storage type travels
// with it: fp32, or bf16 for the activations and weight copies of a --bf16 run on a GPU. The
// model hands these views to backend operations without knowing their type; an operation reads
// and writes each operand in that operand's own type (or, where a backend has no kernel for the
// type, through fp32 copies: see Backend). Like DeviceSpan it has no element access.
#pragma once
#include <cstdint>
#include <type_traits>

namespace mgt {

// Storage type of a floating-point view. bf16 elements are the upper 16 bits of an fp32 value;
// fp16 is IEEE half precision (--fp16 on a GPU).
enum class FloatType : uint8_t { kF32, kBf16, kF16 };

constexpr int64_t float_type_size(FloatType type) { return type == FloatType::kF32 ? 4 : 2; }
// "fp32", "bf16", "fp16".
const char* float_type_name(FloatType type);

[[noreturn]] void throw_device_span_range(int64_t offset, int64_t count, int64_t size);
// Throws mgt::Error: an fp32 pointer was asked of a view of another type.
[[noreturn]] void throw_not_fp32(FloatType type);

template <bool Const>
class FloatSpan {
public:
  using Void = std::conditional_t<Const, const void, void>;
  using Float = std::conditional_t<Const, const float, float>;
  using Byte = std::conditional_t<Const, const unsigned char, unsigned char>;

  constexpr FloatSpan() = default;
  // fp32 elements.
  constexpr FloatSpan(Float* data, int64_t size) : data_(data), size_(size) {}
  constexpr FloatSpan(Void* data, int64_t size, FloatType type)
      : data_(data), size_(size), type_(type) {}

  // A mutable view converts to a read-only one, never the other way round.
  template <bool C, typename = std::enable_if_t<Const && !C>>
  constexpr FloatSpan(FloatSpan<C> other)
      : data_(other.raw()), size_(other.size()), type_(other.type()) {}

  // The elements as fp32; throws for a view of another type.
  Float* data() const {
    if (type_ != FloatType::kF32) throw_not_fp32(type_);
    return static_cast<Float*>(data_);
  }
  constexpr Void* raw() const { return data_; }
  constexpr FloatType type() const { return type_; }
  constexpr bool is_fp32() const { return type_ == FloatType::kF32; }
  constexpr int64_t size() const { return size_; }
  constexpr int64_t bytes() const { return size_ * float_type_size(type_); }
  constexpr bool empty() const { return size_ == 0; }

  // Elements [offset, offset + count), checked.
  FloatSpan subspan(int64_t offset, int64_t count) const {
    if (offset < 0 || count < 0 || offset > size_ || count > size_ - offset) {
      throw_device_span_range(offset, count, size_);
    }
    return FloatSpan(static_cast<Byte*>(data_) + offset * float_type_size(type_), count, type_);
  }
  FloatSpan first(int64_t count) const { return subspan(0, count); }

private:
  Void* data_ = nullptr;
  int64_t size_ = 0;
  FloatType type_ = FloatType::kF32;
};

using FloatView = FloatSpan<false>;
using ConstFloatView = FloatSpan<true>;

// An operand as a backend's operation hook receives it: the typed view, which also converts to
// an fp32 pointer (checked; null for an empty view), so that kernels written for fp32 take it
// unchanged and a view of another type reaching them is an error, not misread memory.
template <bool Const>
class FloatOperand : public FloatSpan<Const> {
public:
  using typename FloatSpan<Const>::Float;
  constexpr FloatOperand() = default;
  constexpr FloatOperand(FloatSpan<Const> view) : FloatSpan<Const>(view) {}
  operator Float*() const { return this->empty() ? nullptr : this->data(); }
};

using FloatArg = FloatOperand<false>;
using ConstFloatArg = FloatOperand<true>;

}  // namespace mgt
