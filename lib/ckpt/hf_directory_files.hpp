// The files of a Hugging Face model directory as save_pretrained leaves it: config.json and the
// weights in safetensors (one model.safetensors, or shards with model.safetensors.index.json),
// in the dtype the model is shared in. What every architecture's reader checks first, and the
// writer they share: the directory is assembled under a temporary name beside DIR and renamed
// into place when complete, so a failed export leaves nothing behind.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/safetensors_format.hpp"
#include "ckpt/safetensors_model_files.hpp"

namespace mgt {

// What a loader of Hugging Face directories needs besides the directory.
struct HfReadOptions {
  std::optional<std::int64_t> seq_length;  // the model's --seq-length (default: its largest position)
};

// How a saver writes the weights.
struct HfExportOptions {
  ckpt::SafetensorsDType dtype = ckpt::SafetensorsDType::kF32;
  std::uint64_t max_shard_bytes = ckpt::kDefaultMaxShardBytes;
};

inline constexpr const char* kHfConfigFile = "config.json";

// Throws mgt::Error unless DIR is a directory with config.json and safetensors weights; pickled
// pytorch_model.bin files are refused with advice, never read. `what` names the model ("GPT-2
// model DIR").
void require_hf_model_files(const std::string& dir, const std::string& what);

// DIR/config.json's text and its model_type ("" when it has none). Throws mgt::Error naming the
// file when it is not a JSON object.
std::string read_hf_config_text(const std::string& dir);
std::string hf_model_type_of(const std::string& config_text, const std::string& config_path);

// --hf-dtype's values: fp32, bf16, fp16 (and torch's names float32, bfloat16, float16). Throws
// mgt::UsageError naming the flag otherwise.
ckpt::SafetensorsDType parse_hf_dtype(std::string_view text);
// config.json's torch_dtype for a dtype: "float32", "bfloat16", "float16", "float64".
std::string hf_torch_dtype_name(ckpt::SafetensorsDType dtype);

// A tensor on its way into an export: Hugging Face name and shape, fp32 values.
struct HfExportTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// Writes DIR (which must not exist or be empty) with config.json = `config_json` and `tensors`,
// given in the model's state_dict order (it decides the shards), converted to options.dtype.
// DIR is locked against other writers (ckpt::FreshOutputDirectory) until the export is renamed
// onto it; holding the lock, it removes the DIR.partial.* directories of killed exports. Throws
// mgt::Error when a write fails; nothing is left behind then.
void write_hf_export_directory(const std::string& dir, const std::string& config_json,
                               const std::vector<HfExportTensor>& tensors, const HfExportOptions& options);

}  // namespace mgt
