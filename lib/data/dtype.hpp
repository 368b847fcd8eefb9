// Element types of Megatron's indexed dataset, by their on-disk codes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

enum class DType : std::uint8_t {
  UInt8 = 1, Int8 = 2, Int16 = 3, Int32 = 4, Int64 = 5, Float64 = 6, Float32 = 7, UInt16 = 8,
};

std::optional<DType> dtype_from_code(std::uint8_t code);
std::size_t dtype_size(DType dtype);
std::string dtype_name(DType dtype);  // numpy's name: "uint16", "int32", ...
bool dtype_is_integer(DType dtype);

// What preprocess_data.py picks for a vocabulary (DType.optimal_dtype): uint16 below 65500.
inline DType optimal_dtype(std::int64_t vocab_size) {
  return vocab_size < 65500 ? DType::UInt16 : DType::Int32;
}

}  // namespace mgt
