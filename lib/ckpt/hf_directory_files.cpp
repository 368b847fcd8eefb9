#include "ckpt/hf_directory_files.hpp"

#include <cstdio>
#include <filesystem>
#include <span>

#include "ckpt/fresh_output_directory.hpp"
#include "ckpt/model_weights.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_scalars.hpp"
#include "core/temporary_file.hpp"

namespace mgt {

namespace fs = std::filesystem;

void require_hf_model_files(const std::string& dir, const std::string& what) {
  if (!fs::is_directory(dir)) throw Error("--load-dir " + dir + ": no such directory");
  if (!fs::exists(fs::path(dir) / kHfConfigFile)) throw Error(what + " has no " + kHfConfigFile);
  if (ckpt::SafetensorsModelFiles::present(dir)) return;
  if (fs::exists(fs::path(dir) / "pytorch_model.bin") || fs::exists(fs::path(dir) / "pytorch_model.bin.index.json"))
    throw Error(what + " has pytorch_model.bin but no model.safetensors; mgt does not read pickled "
                "PyTorch files (they can run code): save it with save_pretrained(dir, safe_serialization=True)");
  throw Error(what + " has no " + ckpt::kSafetensorsSingleFile + " (nor " + ckpt::kSafetensorsIndexFile + ")");
}

std::string read_hf_config_text(const std::string& dir) {
  if (!fs::is_directory(dir)) throw Error("--load-dir " + dir + ": no such directory");
  const std::string path = (fs::path(dir) / kHfConfigFile).string();
  if (!fs::exists(path)) throw Error("Hugging Face model " + dir + " has no " + kHfConfigFile);
  return read_input_file(path, "config.json");
}

std::string hf_model_type_of(const std::string& config_text, const std::string& config_path) {
  const JsonScalars j(config_text, "config " + config_path);
  return j.contains("model_type") && j.show("model_type") != "null" ? j.text("model_type") : "";
}

ckpt::SafetensorsDType parse_hf_dtype(std::string_view text) {
  if (text == "fp32" || text == "float32") return ckpt::SafetensorsDType::kF32;
  if (text == "bf16" || text == "bfloat16") return ckpt::SafetensorsDType::kBF16;
  if (text == "fp16" || text == "float16") return ckpt::SafetensorsDType::kF16;
  throw UsageError("--hf-dtype '" + std::string(text) + "' is not fp32, bf16 or fp16");
}

std::string hf_torch_dtype_name(ckpt::SafetensorsDType dtype) {
  switch (dtype) {
    case ckpt::SafetensorsDType::kF32: return "float32";
    case ckpt::SafetensorsDType::kBF16: return "bfloat16";
    case ckpt::SafetensorsDType::kF16: return "float16";
    case ckpt::SafetensorsDType::kF64: return "float64";
  }
  return "float32";
}

void write_hf_export_directory(const std::string& dir, const std::string& config_json,
                               const std::vector<HfExportTensor>& tensors, const HfExportOptions& options) {
  require_fresh_output_directory(dir);
  const fs::path final_dir = fs::absolute(fs::path(dir).lexically_normal());
  if (final_dir.has_parent_path()) fs::create_directories(final_dir.parent_path());
  // DIR is locked (created when absent) until the export is renamed onto it; under the lock,
  // what killed exports of DIR left beside it is removed.
  ckpt::FreshOutputDirectory output(final_dir.string());
  ckpt::remove_interrupted_exports(final_dir.string());
  // An unpredictable name, created exclusively: nothing planted beside DIR is written through.
  const fs::path staging = create_temporary_directory(final_dir.string());
  try {
    // fp32 is written straight from the values; the narrower dtypes from rounded copies.
    std::vector<std::vector<std::byte>> narrowed;
    narrowed.reserve(tensors.size());
    std::vector<ckpt::SafetensorsTensor> files;
    for (const HfExportTensor& t : tensors) {
      std::span<const std::byte> data = std::as_bytes(std::span<const float>(t.values));
      if (options.dtype != ckpt::SafetensorsDType::kF32) {
        narrowed.push_back(ckpt::float32_to_safetensors(options.dtype, t.values));
        data = narrowed.back();
      }
      files.push_back({t.name, options.dtype, t.shape, data});
    }
    // transformers refuses safetensors files whose metadata does not name a framework.
    ckpt::write_safetensors_model_files(staging.string(), files, options.max_shard_bytes, {{"format", "pt"}});
    write_file_atomically((staging / kHfConfigFile).string(), config_json);
    sync_directory(staging.string());
    output.replace_with(staging.string());
    sync_directory(final_dir.parent_path().string());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
}

}  // namespace mgt
