// What a communicator moves: a typed run of elements, in host memory or in the memory of the
// compute backend. Type-erased so that one virtual hook per operation serves every element type;
// the typed helpers below build them from spans, so callers never spell out element types.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/device_span.hpp"

namespace mgt::dist {

enum class ReduceOp { Sum, Max };

// BFloat16, Float16: the activations of a --bf16 / --fp16 run on a GPU (FloatView of type kBf16 /
// kF16). UInt8: FP8 codes (the weights --fp8-param-gather all-gathers), moved, never reduced.
enum class ElementType { Float32, Float64, Int64, BFloat16, Float16, UInt8 };

// Host: ordinary host memory, always directly usable.
// Backend: memory a compute backend owns (a DeviceSpan). That is host memory for the CPU backend
// and device memory for a GPU one; a communicator that cannot read device memory directly (MPI)
// stages it through host memory with the MemoryMover it was given, and uses it in place when it
// was given none.
enum class MemorySpace { Host, Backend };

template <typename T>
concept CommElement = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                      std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t>;

template <CommElement T>
constexpr ElementType element_type_of() {
  if constexpr (std::is_same_v<T, float>) return ElementType::Float32;
  else if constexpr (std::is_same_v<T, double>) return ElementType::Float64;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return ElementType::UInt8;
  else return ElementType::Int64;
}

constexpr std::size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::Float32: return 4;
    case ElementType::BFloat16:
    case ElementType::Float16: return 2;
    case ElementType::UInt8: return 1;
    default: return 8;
  }
}

// "float32", "float64", "int64", "bfloat16", "float16", "uint8".
const char* element_type_name(ElementType type);
// "sum", "max".
const char* reduce_op_name(ReduceOp op);

// Elements an operation reads.
struct SendBuffer {
  const void* data = nullptr;
  std::int64_t count = 0;
  ElementType type = ElementType::Float32;
  MemorySpace space = MemorySpace::Host;
  std::size_t bytes() const { return static_cast<std::size_t>(count) * element_size(type); }
};

// Elements an operation writes (or reads and overwrites, for in-place operations).
struct RecvBuffer {
  void* data = nullptr;
  std::int64_t count = 0;
  ElementType type = ElementType::Float32;
  MemorySpace space = MemorySpace::Host;
  std::size_t bytes() const { return static_cast<std::size_t>(count) * element_size(type); }
  operator SendBuffer() const { return {data, count, type, space}; }
};

template <CommElement T>
RecvBuffer host_buffer(std::span<T> x) {
  return {x.data(), static_cast<std::int64_t>(x.size()), element_type_of<T>(), MemorySpace::Host};
}
template <CommElement T>
SendBuffer host_buffer(std::span<const T> x) {
  return {x.data(), static_cast<std::int64_t>(x.size()), element_type_of<T>(), MemorySpace::Host};
}
template <CommElement T>
RecvBuffer backend_buffer(DeviceSpan<T> x) {
  return {x.data(), x.size(), element_type_of<T>(), MemorySpace::Backend};
}
template <CommElement T>
SendBuffer backend_buffer(DeviceSpan<const T> x) {
  return {x.data(), x.size(), element_type_of<T>(), MemorySpace::Backend};
}

inline ElementType element_type_of(FloatType type) {
  return type == FloatType::kF32    ? ElementType::Float32
         : type == FloatType::kBf16 ? ElementType::BFloat16
                                    : ElementType::Float16;
}
inline RecvBuffer backend_buffer(FloatView x) {
  return {x.raw(), x.size(), element_type_of(x.type()), MemorySpace::Backend};
}
inline SendBuffer backend_buffer(ConstFloatView x) {
  return {x.raw(), x.size(), element_type_of(x.type()), MemorySpace::Backend};
}

}  // namespace mgt::dist
