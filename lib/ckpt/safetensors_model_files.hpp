// A Hugging Face model's weights as save_pretrained lays them out in its directory: one
// model.safetensors, or, when they exceed the shard size, model-0000i-of-0000N.safetensors files
// and model.safetensors.index.json mapping each tensor name to its file:
//   {"metadata": {"total_parameters": N, "total_size": BYTES}, "weight_map": {"NAME": "FILE", ...}}
// (transformers before version 5 wrote total_size alone; readers use only the weight_map).
// Shards are cut the way huggingface_hub's split_torch_state_dict_into_shards cuts them: tensors
// in the model's order, a new shard when the next tensor would push the current one past the
// limit; a tensor larger than the limit becomes a shard of its own at once, numbered before the
// shard still being filled.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/safetensors_reader.hpp"
#include "ckpt/safetensors_writer.hpp"

namespace mgt::ckpt {

inline constexpr const char* kSafetensorsSingleFile = "model.safetensors";
inline constexpr const char* kSafetensorsIndexFile = "model.safetensors.index.json";

// save_pretrained's default max_shard_size, "5GB" (decimal units, as transformers counts them).
inline constexpr std::uint64_t kDefaultMaxShardBytes = 5'000'000'000ULL;

// transformers' convert_file_size_to_int: an integer number of bytes, or an integer followed by
// B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), any case. Throws
// mgt::UsageError naming `flag` otherwise, and for a size of zero.
std::uint64_t parse_shard_size(std::string_view text, const std::string& flag);

class SafetensorsModelFiles {
public:
  // Opens DIR/model.safetensors, else DIR/model.safetensors.index.json and every shard it names.
  // Throws mgt::Error naming the file at fault: an index that is not JSON or has no weight_map
  // object of strings, a shard name that is not a plain file name in DIR, a missing shard, a
  // tensor the index places in a file that does not hold it, a tensor a shard holds that the
  // index does not list, a name held by two shards; and every check SafetensorsReader makes.
  explicit SafetensorsModelFiles(const std::string& dir);

  // Whether DIR holds either layout (it may still be malformed).
  static bool present(const std::string& dir);

  // "DIR/model.safetensors" or "DIR/model.safetensors.index.json": what messages name.
  const std::string& description() const { return description_; }
  // nullptr when absent.
  const SafetensorsTensorInfo* find(std::string_view name) const;
  // The file holding a tensor found by find(), for messages.
  const std::string& file_of(const SafetensorsTensorInfo& tensor) const;
  std::vector<float> read_float32(const SafetensorsTensorInfo& tensor) const;
  // Every tensor name, sorted.
  std::vector<std::string> tensor_names() const;

private:
  struct Location {
    std::size_t file;
    const SafetensorsTensorInfo* info;
  };
  const Location& locate(const SafetensorsTensorInfo& tensor) const;

  std::string description_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, Location, std::less<>> tensors_;
};

// Writes `tensors` (in the model's order, which decides the shards) into the existing directory
// DIR: one model.safetensors when they fit in max_shard_bytes, else numbered shards and the
// index. Each file is written atomically; `metadata` goes into every file's header. Returns the
// names of the files written, the index last.
std::vector<std::string> write_safetensors_model_files(const std::string& dir,
                                                       const std::vector<SafetensorsTensor>& tensors,
                                                       std::uint64_t max_shard_bytes,
                                                       const std::map<std::string, std::string>& metadata);

// The index text as transformers writes it (json.dumps(index, indent=2, sort_keys=True) + "\n").
std::string safetensors_index_json(std::uint64_t total_parameters, std::uint64_t total_size,
                                   const std::map<std::string, std::string>& weight_map);

}  // namespace mgt::ckpt
