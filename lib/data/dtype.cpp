#include "data/dtype.hpp"

namespace mgt {

std::optional<DType> dtype_from_code(std::uint8_t code) {
  if (code >= 1 && code <= 8) return static_cast<DType>(code);
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::UInt8: case DType::Int8: return 1;
    case DType::Int16: case DType::UInt16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float64: return "float64";
    case DType::Float32: return "float32";
    case DType::UInt16: return "uint16";
  }
  return "unknown";
}

bool dtype_is_integer(DType dtype) { return dtype != DType::Float32 && dtype != DType::Float64; }

}  // namespace mgt
