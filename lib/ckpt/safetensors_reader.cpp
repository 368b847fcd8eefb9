#include "ckpt/safetensors_reader.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.hpp"

namespace mgt::ckpt {

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Product of the dims times the element size, or nullopt on overflow.
std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, std::size_t element_size) {
  std::uint64_t n = element_size;
  for (std::int64_t d : shape) {
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && n > std::numeric_limits<std::uint64_t>::max() / dim) return std::nullopt;
    n *= dim;
  }
  return n;
}

}  // namespace

std::int64_t SafetensorsTensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

void SafetensorsReader::fail(const std::string& message) const {
  throw Error("safetensors file " + file_.path() + ": " + message);
}

SafetensorsReader::SafetensorsReader(const std::string& path) : file_(path) {
  if (file_.size() < 8) fail("only " + std::to_string(file_.size()) + " bytes, too short for the 8-byte header length");
  std::uint64_t header_size;
  std::memcpy(&header_size, file_.data(), 8);  // little-endian, as the format and the host are
  if (header_size > file_.size() - 8)
    fail("header length " + std::to_string(header_size) + " is larger than the file (" +
         std::to_string(file_.size()) + " bytes): truncated or not a safetensors file");
  if (header_size > kMaxSafetensorsHeaderBytes)
    fail("header length " + std::to_string(header_size) + " exceeds the format's limit of " +
         std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  data_start_ = 8 + header_size;
  parse_header(file_.view().substr(8, header_size));
}

void SafetensorsReader::parse_header(std::string_view header) {
  if (header.empty() || header.front() != '{') fail("header does not start with '{'");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  const simdjson::padded_string text(header);
  if (auto error = parser.parse(text).get(root))
    fail(std::string("header is not valid JSON (") + simdjson::error_message(error) + ")");
  simdjson::dom::object object;
  if (root.get(object)) fail("header is not a JSON object");

  const std::uint64_t data_size = file_.size() - data_start_;
  bool seen_metadata = false;
  for (auto field : object) {
    const std::string name(field.key);
    if (index_.count(name) || (name == kMetadataKey && seen_metadata))
      fail("tensor '" + name + "' appears twice in the header");
    if (name == kMetadataKey) {
      seen_metadata = true;
      simdjson::dom::object meta;
      if (field.value.get(meta)) fail("'__metadata__' is not an object of strings");
      for (auto entry : meta) {
        std::string_view value;
        if (entry.value.get(value)) fail("'__metadata__' value of '" + std::string(entry.key) + "' is not a string");
        metadata_[std::string(entry.key)] = std::string(value);
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    simdjson::dom::object entry;
    if (field.value.get(entry)) fail(where + " is not described by an object");

    SafetensorsTensorInfo info;
    info.name = name;
    std::string_view dtype_name;
    if (entry["dtype"].get(dtype_name)) fail(where + " has no string 'dtype'");
    const auto dtype = parse_safetensors_dtype(dtype_name);
    if (!dtype)
      fail(where + " has dtype '" + std::string(dtype_name) + "', which mgt does not read (F64, F32, F16, BF16)");
    info.dtype = *dtype;

    simdjson::dom::array shape;
    if (entry["shape"].get(shape)) fail(where + " has no 'shape' array");
    for (auto dim : shape) {
      std::uint64_t d;
      if (dim.get(d) || d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(where + " has a shape entry that is not a non-negative integer");
      info.shape.push_back(static_cast<std::int64_t>(d));
    }

    simdjson::dom::array offsets;
    if (entry["data_offsets"].get(offsets) || offsets.size() != 2)
      fail(where + " has no 'data_offsets' pair [begin, end]");
    if (offsets.at(0).get(info.begin) || offsets.at(1).get(info.end))
      fail(where + " has data_offsets that are not non-negative integers");
    if (info.end < info.begin)
      fail(where + " has data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
           "] that end before they begin");
    if (info.end > data_size)
      fail(where + " has data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
           "] out of range: the data is " + std::to_string(data_size) + " bytes");
    const auto expected = byte_size(info.shape, safetensors_dtype_size(info.dtype));
    if (!expected || *expected != info.end - info.begin)
      fail(where + " of shape " + shape_text(info.shape) + " and dtype " + std::string(dtype_name) + " needs " +
           (expected ? std::to_string(*expected) : std::string("more than 2^64")) +
           " bytes but its data_offsets span " + std::to_string(info.end - info.begin));
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const SafetensorsTensorInfo& t = tensors_[i];
    if (t.begin < covered)
      fail("tensor '" + t.name + "' overlaps tensor '" + tensors_[i - 1].name + "' (data_offsets begin at " +
           std::to_string(t.begin) + ", before " + std::to_string(covered) + ")");
    if (t.begin > covered)
      fail("bytes " + std::to_string(covered) + " to " + std::to_string(t.begin) + " before tensor '" + t.name +
           "' belong to no tensor (the format allows no gaps)");
    covered = t.end;
    index_[t.name] = i;
  }
  if (covered != data_size)
    fail(std::to_string(data_size - covered) + " bytes after the last tensor belong to no tensor (the format "
         "allows no trailing data)");
}

const SafetensorsTensorInfo* SafetensorsReader::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> SafetensorsReader::bytes(const SafetensorsTensorInfo& tensor) const {
  return {reinterpret_cast<const std::byte*>(file_.data()) + data_start_ + tensor.begin, tensor.end - tensor.begin};
}

std::vector<float> SafetensorsReader::read_float32(const SafetensorsTensorInfo& tensor) const {
  return safetensors_to_float32(tensor.dtype, bytes(tensor));
}

}  // namespace mgt::ckpt
