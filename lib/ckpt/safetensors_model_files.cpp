#include "ckpt/safetensors_model_files.hpp"

#include <simdjson.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_text.hpp"

namespace mgt::ckpt {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A shard name from an index must stay inside the model directory.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

std::string shard_file_name(std::size_t index, std::size_t count) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buffer;
}

}  // namespace

std::uint64_t parse_shard_size(std::string_view text, const std::string& flag) {
  const std::string t = lower(text);
  std::size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  const std::string unit = t.substr(digits);
  static const std::map<std::string, std::uint64_t> kUnits = {
      {"", 1},
      {"b", 1},
      {"kb", 1000ULL},
      {"mb", 1000ULL * 1000},
      {"gb", 1000ULL * 1000 * 1000},
      {"tb", 1000ULL * 1000 * 1000 * 1000},
      {"kib", 1ULL << 10},
      {"mib", 1ULL << 20},
      {"gib", 1ULL << 30},
      {"tib", 1ULL << 40},
  };
  const auto it = kUnits.find(unit);
  const auto bad = [&](const std::string& why) {
    return UsageError(flag + " '" + std::string(text) + "' " + why);
  };
  if (digits == 0 || digits > 15 || it == kUnits.end())
    throw bad("is not a size (an integer, optionally followed by KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
  const std::uint64_t count = std::stoull(t.substr(0, digits));
  if (count == 0) throw bad("must be larger than zero");
  if (count > std::numeric_limits<std::uint64_t>::max() / it->second) throw bad("is too large");
  return count * it->second;
}

bool SafetensorsModelFiles::present(const std::string& dir) {
  return fs::exists(fs::path(dir) / kSafetensorsSingleFile) || fs::exists(fs::path(dir) / kSafetensorsIndexFile);
}

SafetensorsModelFiles::SafetensorsModelFiles(const std::string& dir) {
  const std::string single = (fs::path(dir) / kSafetensorsSingleFile).string();
  if (fs::exists(single)) {
    description_ = single;
    files_.push_back(std::make_unique<SafetensorsReader>(single));
    for (const SafetensorsTensorInfo& t : files_[0]->tensors()) tensors_[t.name] = {0, &t};
    return;
  }
  const std::string index_path = (fs::path(dir) / kSafetensorsIndexFile).string();
  description_ = index_path;
  const auto fail = [&](const std::string& why) { return Error("safetensors index " + index_path + ": " + why); };
  if (!fs::exists(index_path))
    throw Error("model directory " + dir + " has neither " + kSafetensorsSingleFile + " nor " + kSafetensorsIndexFile);

  const simdjson::padded_string text(read_input_file(index_path, "safetensors index"));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(text).get(root))
    throw fail(std::string("not valid JSON (") + simdjson::error_message(error) + ")");
  simdjson::dom::object weight_map;
  if (root["weight_map"].get(weight_map)) throw fail("has no 'weight_map' object");

  std::map<std::string, std::size_t> file_numbers;  // shard name → position in files_
  std::map<std::string, std::string> listed;        // tensor → shard name
  for (auto entry : weight_map) {
    const std::string name(entry.key);
    std::string_view file_view;
    if (entry.value.get(file_view)) throw fail("weight_map entry '" + name + "' is not a file name string");
    const std::string file(file_view);
    if (!is_plain_file_name(file))
      throw fail("weight_map entry '" + name + "' names '" + file + "', which is not a file in the model directory");
    if (listed.count(name)) throw fail("weight_map lists tensor '" + name + "' twice");
    listed[name] = file;
    if (!file_numbers.count(file)) {
      const std::string path = (fs::path(dir) / file).string();
      if (!fs::exists(path)) throw fail("tensor '" + name + "' is in " + file + ", which does not exist");
      file_numbers[file] = files_.size();
      files_.push_back(std::make_unique<SafetensorsReader>(path));
    }
  }
  if (files_.empty()) throw fail("weight_map is empty");
  for (const auto& [name, file] : listed) {
    const std::size_t number = file_numbers.at(file);
    const SafetensorsTensorInfo* info = files_[number]->find(name);
    if (info == nullptr) throw fail("tensor '" + name + "' is listed in " + file + ", which does not hold it");
    tensors_[name] = {number, info};
  }
  for (const auto& file : files_)
    for (const SafetensorsTensorInfo& t : file->tensors()) {
      const auto it = listed.find(t.name);
      if (it == listed.end())
        throw fail("tensor '" + t.name + "' of " + fs::path(file->path()).filename().string() +
                   " is not in the weight_map");
      if (tensors_.at(t.name).info != &t)
        throw fail("tensor '" + t.name + "' is held by " + fs::path(file->path()).filename().string() +
                   " as well as by " + it->second);
    }
}

const SafetensorsModelFiles::Location& SafetensorsModelFiles::locate(const SafetensorsTensorInfo& tensor) const {
  const auto it = tensors_.find(tensor.name);
  if (it == tensors_.end() || it->second.info != &tensor)
    throw Error("tensor '" + tensor.name + "' is not one of " + description_);
  return it->second;
}

const SafetensorsTensorInfo* SafetensorsModelFiles::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.info;
}

const std::string& SafetensorsModelFiles::file_of(const SafetensorsTensorInfo& tensor) const {
  return files_[locate(tensor).file]->path();
}

std::vector<float> SafetensorsModelFiles::read_float32(const SafetensorsTensorInfo& tensor) const {
  return files_[locate(tensor).file]->read_float32(tensor);
}

std::vector<std::string> SafetensorsModelFiles::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, location] : tensors_) names.push_back(name);
  return names;
}

std::string safetensors_index_json(std::uint64_t total_parameters, std::uint64_t total_size,
                                   const std::map<std::string, std::string>& weight_map) {
  std::string j = "{\n  \"metadata\": {\n    \"total_parameters\": " + std::to_string(total_parameters) +
                  ",\n    \"total_size\": " + std::to_string(total_size) + "\n  },\n";
  j += "  \"weight_map\": {";
  bool first = true;
  for (const auto& [name, file] : weight_map) {
    j += (first ? "\n" : ",\n") + std::string("    ") + json_quote(name) + ": " + json_quote(file);
    first = false;
  }
  j += first ? "}\n}\n" : "\n  }\n}\n";
  return j;
}

std::vector<std::string> write_safetensors_model_files(const std::string& dir,
                                                       const std::vector<SafetensorsTensor>& tensors,
                                                       std::uint64_t max_shard_bytes,
                                                       const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes == 0) throw Error("the largest shard size must be larger than zero");
  // huggingface_hub's split: an oversized tensor is a shard of its own at once, and the shard
  // being filled stays open after it.
  std::vector<std::vector<SafetensorsTensor>> shards;
  std::uint64_t current = 0;
  std::vector<SafetensorsTensor> open;
  for (const SafetensorsTensor& t : tensors) {
    const std::uint64_t size = t.data.size();
    if (size > max_shard_bytes) {
      shards.push_back({t});
      continue;
    }
    if (!open.empty() && current + size > max_shard_bytes) {
      shards.push_back(std::move(open));
      open.clear();
      current = 0;
    }
    open.push_back(t);
    current += size;
  }
  if (!open.empty() || shards.empty()) shards.push_back(std::move(open));

  std::vector<std::string> written;
  if (shards.size() == 1) {
    write_safetensors((fs::path(dir) / kSafetensorsSingleFile).string(), shards[0], metadata);
    written.push_back(kSafetensorsSingleFile);
    return written;
  }
  std::map<std::string, std::string> weight_map;
  std::uint64_t total_size = 0, total_parameters = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_file_name(i, shards.size());
    for (const SafetensorsTensor& t : shards[i]) {
      weight_map[t.name] = name;
      total_size += t.data.size();
      total_parameters += t.data.size() / safetensors_dtype_size(t.dtype);
    }
    write_safetensors((fs::path(dir) / name).string(), shards[i], metadata);
    written.push_back(name);
  }
  if (weight_map.size() != tensors.size())
    throw Error("safetensors files in " + dir + ": a tensor name is given twice");
  write_file_atomically((fs::path(dir) / kSafetensorsIndexFile).string(),
                        safetensors_index_json(total_parameters, total_size, weight_map));
  written.push_back(kSafetensorsIndexFile);
  return written;
}

}  // namespace mgt::ckpt
