// Reading a safetensors file through a memory map. The constructor validates the whole header
// the way Hugging Face's reader does, so that every later read is in bounds: a header that fits
// the file and is a JSON object, known dtypes, shapes whose byte size equals their offset span,
// offsets inside the data, no duplicate names, and tensors that tile the data exactly (no
// overlap, no gap, nothing after the last one — the format forbids unindexed bytes so that a
// file cannot carry a second meaning).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/safetensors_format.hpp"
#include "core/mapped_file.hpp"

namespace mgt::ckpt {

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the first byte after the header
  std::uint64_t end = 0;

  std::int64_t numel() const;
};

class SafetensorsReader {
public:
  // Throws mgt::Error "safetensors file PATH: ..." naming the tensor at fault.
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // In file order (ascending offsets).
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const SafetensorsTensorInfo* find(std::string_view name) const;

  std::span<const std::byte> bytes(const SafetensorsTensorInfo& tensor) const;
  // The tensor's values converted to fp32 (see safetensors_to_float32).
  std::vector<float> read_float32(const SafetensorsTensorInfo& tensor) const;

private:
  [[noreturn]] void fail(const std::string& message) const;
  void parse_header(std::string_view header);

  MappedFile file_;
  std::uint64_t data_start_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;  // name → position in tensors_
  std::map<std::string, std::string> metadata_;
};

}  // namespace mgt::ckpt
