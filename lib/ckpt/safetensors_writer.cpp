#include "ckpt/safetensors_writer.hpp"

#include <algorithm>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"

namespace mgt::ckpt {

std::string safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      h += (first ? "" : ",") + json_quote(key) + ":" + json_quote(value);
      first = false;
    }
    h += "}";
  }
  std::uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    if (h.size() > 1) h += ",";
    h += json_quote(t.name) + ":{\"dtype\":\"" + std::string(safetensors_dtype_name(t.dtype)) + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) h += (i ? "," : "") + std::to_string(t.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

void write_safetensors(const std::string& path, std::vector<SafetensorsTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensor& t = tensors[i];
    if (t.name == "__metadata__") throw Error("safetensors file " + path + ": '__metadata__' cannot name a tensor");
    if (i > 0 && tensors[i - 1].name == t.name)
      throw Error("safetensors file " + path + ": tensor '" + t.name + "' is given twice");
    std::uint64_t expected = safetensors_dtype_size(t.dtype);
    for (std::int64_t d : t.shape) {
      if (d < 0) throw Error("safetensors file " + path + ": tensor '" + t.name + "' has a negative dimension");
      expected *= static_cast<std::uint64_t>(d);
    }
    if (expected != t.data.size())
      throw Error("safetensors file " + path + ": tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                  " bytes of data, its shape needs " + std::to_string(expected));
  }
  const std::string header = safetensors_header(tensors, metadata);
  const std::uint64_t header_size = header.size();
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header_size >> (8 * i));

  AtomicFile file(path);
  file.write(length, sizeof length);
  file.write(header);
  for (const SafetensorsTensor& t : tensors) file.write(t.data.data(), t.data.size());
  file.commit();
}

}  // namespace mgt::ckpt
