#include "ckpt/model_weights.hpp"

#include <filesystem>
#include <set>
#include <span>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/fresh_output_directory.hpp"
#include "ckpt/hf_architecture_record.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

std::int64_t ModelWeights::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& [name, values] : tensors) n += static_cast<std::int64_t>(values.size());
  return n;
}

const std::vector<float>& ModelWeights::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(source + " has no tensor '" + name + "'");
  return it->second;
}

void require_fresh_output_directory(const std::string& dir) { ckpt::require_fresh_directory(dir, "--save-dir"); }

ModelWeights read_mgt_model_weights(const std::string& load_dir) {
  const ModelCheckpoint checkpoint = open_model_checkpoint(load_dir);
  ModelWeights w;
  w.config = checkpoint.config;
  w.tokenizer_json = checkpoint.metadata.tokenizer_json.empty() ? "{}" : checkpoint.metadata.tokenizer_json;
  w.args_json = checkpoint.metadata.args_json;
  w.iteration = checkpoint.metadata.iteration;
  w.source = "checkpoint " + checkpoint.directory;
  if (const auto record = checkpoint.metadata.extra_json.find(kHfArchitectureKey);
      record != checkpoint.metadata.extra_json.end()) {
    const HfArchitectureRecord hf =
        parse_hf_architecture_record(record->second, w.source + ": " + std::string(kHfArchitectureKey));
    w.hf_model_type = hf.model_type;
    w.hf_sliding_window = hf.sliding_window;
  }
  // Read straight from the shard rather than through load_checkpoint_model: a conversion needs
  // no gradient buffer and no initialisation, which would triple the memory of a large model.
  const ckpt::ShardedCheckpoint reader(checkpoint.directory);
  const ParameterTable table = gpt_parameter_table(w.config);
  std::set<std::string> expected;
  for (const ParameterEntry& e : table.entries) expected.insert(ckpt::model_tensor_path(e.name));
  for (const std::string& name : reader.tensor_names(ckpt::kModelGroup))
    if (!expected.count(name))
      throw Error(w.source + ": tensor '" + name + "' is not a parameter of the model its arguments describe");
  for (const ParameterEntry& e : table.entries) {
    const std::string path = ckpt::model_tensor_path(e.name);
    if (!reader.contains(path)) throw Error(w.source + " has no tensor '" + path + "'");
    std::vector<float>& values = w.tensors[e.name];
    values.resize(static_cast<std::size_t>(e.global_numel()));
    reader.read_whole(path, ckpt::TensorDType::Float32, e.global_shape,
                      std::as_writable_bytes(std::span<float>(values)));
  }
  return w;
}

std::string write_mgt_model_weights(const ModelWeights& weights, const std::string& save_dir,
                                   const ckpt::TargetLayout& layout) {
  require_fresh_output_directory(save_dir);
  const ParameterTable table = gpt_parameter_table(weights.config);
  for (const ParameterEntry& e : table.entries) {
    const std::vector<float>& values = weights.at(e.name);
    if (static_cast<std::int64_t>(values.size()) != e.global_numel())
      throw Error(weights.source + ": tensor '" + e.name + "' has " + std::to_string(values.size()) +
                  " elements, the model needs " + std::to_string(e.global_numel()));
  }
  if (weights.tensors.size() != table.entries.size())
    throw Error(weights.source + " has tensors that are not parameters of its model");
  ckpt::CheckpointMetadata meta;
  meta.iteration = weights.iteration;
  meta.args_json = weights.args_json.empty() ? model_args_json(weights.config) : weights.args_json;
  meta.tokenizer_json = weights.tokenizer_json;
  meta.extra_json["parallel_layout"] = ckpt::parallel_layout_json(layout);
  // An imported model keeps the architecture it came from, for its export.
  if (!weights.hf_model_type.empty())
    meta.extra_json[kHfArchitectureKey] =
        hf_architecture_record_json({weights.hf_model_type, weights.hf_sliding_window});
  ckpt::IterationSave save(save_dir, weights.iteration);
  ckpt::LayoutShardWriters writers(save.staging_dir(), weights.config, layout, meta);
  for (const ParameterEntry& e : table.entries)
    writers.write(ckpt::model_tensor_path(e.name), ckpt::TensorDType::Float32, e.global_shape,
                  std::as_bytes(std::span<const float>(weights.at(e.name))));
  writers.close();
  save.commit();
  return save.final_dir();
}

}  // namespace mgt
