// Writing a safetensors file the way Hugging Face's writer lays it out: tensors sorted by name
// (HF sorts by dtype alignment, then name; for one dtype that is name order), packed with no gaps,
// the JSON header padded with spaces to a multiple of 8 bytes so that the data starts aligned.
// The file is written under a temporary name and renamed into place when complete.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ckpt/safetensors_format.hpp"

namespace mgt::ckpt {

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;  // row-major, little-endian; size must match shape and dtype

  static SafetensorsTensor float32(std::string name, std::vector<std::int64_t> shape, std::span<const float> values) {
    return {std::move(name), SafetensorsDType::kF32, std::move(shape), std::as_bytes(values)};
  }
};

// The header text, padding included (exposed for tests and for writers of malformed files).
std::string safetensors_header(const std::vector<SafetensorsTensor>& tensors_sorted,
                               const std::map<std::string, std::string>& metadata);

// Throws mgt::Error naming the tensor when a name repeats or its data does not match its shape.
void write_safetensors(const std::string& path, std::vector<SafetensorsTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace mgt::ckpt
