// The safetensors file format (Hugging Face): an 8-byte little-endian header length N, N bytes of
// JSON describing every tensor (dtype, shape, [begin, end) byte offsets into the data that
// follows), then the tensors' bytes, row-major and little-endian. Only the floating-point dtypes
// a GPT's weights come in are supported.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace mgt::ckpt {

enum class SafetensorsDType { kF64, kF32, kF16, kBF16 };

std::string_view safetensors_dtype_name(SafetensorsDType dtype);  // "F64", "F32", "F16", "BF16"
std::size_t safetensors_dtype_size(SafetensorsDType dtype);       // bytes per element
// nullopt for every other name, the format's integer and 8-bit dtypes included.
std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name);

// Converts `bytes` (little-endian elements of `dtype`) to fp32: exact for F32, F16 and BF16;
// F64 rounds to nearest. bytes.size() must be a multiple of the element size.
std::vector<float> safetensors_to_float32(SafetensorsDType dtype, std::span<const std::byte> bytes);

// The inverse, for writing: fp32 values as little-endian elements of `dtype`, rounded to nearest
// (ties to even) as torch's Tensor.to(dtype) rounds them; F16 overflows to ±inf, NaN stays NaN.
// Widening the result again with safetensors_to_float32 gives back F32 values exactly and
// F16/BF16 values that are exactly representable.
std::vector<std::byte> float32_to_safetensors(SafetensorsDType dtype, std::span<const float> values);

// A header larger than this is refused before parsing, as Hugging Face's reader does, so that a
// corrupt length cannot make us allocate gigabytes.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

}  // namespace mgt::ckpt
