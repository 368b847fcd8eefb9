#include "ckpt/layout_shard_writers.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/parameter_piece_record.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt/tensor_pieces.hpp"
#include "core/error.hpp"
#include "model/pipeline_stage.hpp"

namespace mgt::ckpt {
namespace {

// "model/<param>" and "optimizer/<state>/<param>" → <param>; empty for anything else.
std::string parameter_of(const std::string& path, bool& optimizer_state) {
  const std::string model = std::string(kModelGroup) + "/";
  optimizer_state = false;
  if (path.starts_with(model)) return path.substr(model.size());
  if (path.starts_with("optimizer/")) {
    const auto slash = path.find('/', 10);
    if (slash == std::string::npos) return {};
    optimizer_state = true;
    return path.substr(slash + 1);
  }
  return {};
}

std::vector<PipelineStage> stages_of(const GptConfig& config, const TargetLayout& layout) {
  PipelineSplit split;
  split.pipeline_size = layout.pipeline_parallel_size;
  return pipeline_stages(config.num_layers, split);
}

}  // namespace

void validate_target_layout(const GptConfig& config, const TargetLayout& layout) {
  if (layout.tensor_parallel_size < 1 || layout.pipeline_parallel_size < 1 || layout.data_parallel_size < 1)
    throw UsageError("target parallel sizes must be >= 1");
  try {
    validate_tensor_parallel(config, {layout.tensor_parallel_size, 0});
  } catch (const Error& e) {
    throw UsageError("--target-tensor-parallel-size " + std::to_string(layout.tensor_parallel_size) +
                     " does not fit the model: " + e.what());
  }
  if (layout.pipeline_parallel_size > config.num_layers)
    throw UsageError("--target-pipeline-parallel-size " + std::to_string(layout.pipeline_parallel_size) +
                     " exceeds the model's " + std::to_string(config.num_layers) + " layers");
  try {
    stages_of(config, layout);
  } catch (const Error& e) {
    throw UsageError("--target-pipeline-parallel-size " + std::to_string(layout.pipeline_parallel_size) + ": " +
                     e.what());
  }
}

std::string parallel_layout_json(const TargetLayout& l, bool sequence_parallel) {
  const auto flag = [](bool b) { return b ? std::string("true") : std::string("false"); };
  const int world = l.tensor_parallel_size * l.pipeline_parallel_size * l.data_parallel_size;
  return "{\"world_size\": " + std::to_string(world) + ", \"tensor_model_parallel_size\": " +
         std::to_string(l.tensor_parallel_size) + ", \"pipeline_model_parallel_size\": " +
         std::to_string(l.pipeline_parallel_size) + ", \"data_parallel_size\": " +
         std::to_string(l.data_parallel_size) + ", \"sequence_parallel\": " + flag(sequence_parallel) +
         ", \"use_distributed_optimizer\": " + flag(l.distributed_optimizer) + ", \"stored_tensors\": \"per_rank\"}";
}

LayoutShardWriters::LayoutShardWriters(const std::string& dir, const GptConfig& config, const TargetLayout& layout,
                                       CheckpointMetadata metadata)
    : layout_(layout) {
  validate_target_layout(config, layout);
  const std::vector<PipelineStage> stages = stages_of(config, layout);
  const int tp_size = layout.tensor_parallel_size;
  const int pp_size = layout.pipeline_parallel_size;
  tables_.reserve(static_cast<std::size_t>(tp_size * pp_size));
  for (int t = 0; t < tp_size; ++t)
    for (int p = 0; p < pp_size; ++p)
      tables_.push_back(gpt_parameter_table(config, {tp_size, t}, stages[static_cast<std::size_t>(p)]));
  const bool optimizer_files = layout.distributed_optimizer && layout.data_parallel_size > 1;
  auto open = [&](int t, int p, std::optional<int> d) {
    CheckpointMetadata meta = metadata;
    meta.world = {tp_size, pp_size, layout.data_parallel_size, t, p, d.value_or(0)};
    const PipelineStage& stage = stages[static_cast<std::size_t>(p)];
    meta.extra_json["shard"] = "{\"first_layer\": " + std::to_string(stage.first_layer) +
                               ", \"num_layers\": " + std::to_string(stage.layers_of(config.num_layers)) + "}";
    ShardId id = d ? ShardId::data_parallel_shard(meta.world) : ShardId::model_shard(meta.world);
    RankFile file{t, p, &tables_[static_cast<std::size_t>(t * pp_size + p)], {},
                  ShardWriter(dir + "/" + shard_file_name(id), meta)};
    if (d) file.shard = data_parallel_shard(file.table->buffer_size, layout.data_parallel_size, *d);
    (d ? optimizer_files_ : model_files_).push_back(std::move(file));
  };
  for (int t = 0; t < tp_size; ++t)
    for (int p = 0; p < pp_size; ++p) {
      open(t, p, std::nullopt);
      if (optimizer_files)
        for (int d = 0; d < layout.data_parallel_size; ++d) open(t, p, d);
    }
}

void LayoutShardWriters::write_piece(RankFile& file, const std::string& path, const ParameterEntry& e, bool flat,
                                     std::span<const std::int64_t> global_shape, std::span<const std::byte> whole) {
  const TensorParallelRank tp{layout_.tensor_parallel_size, file.tensor_rank};
  TensorRecord piece_record = parameter_piece_record(path, e, tp);
  if (!std::equal(global_shape.begin(), global_shape.end(), e.global_shape.begin(), e.global_shape.end()))
    throw Error("tensor '" + path + "' has shape " + format_shape(global_shape) + ", the model's parameter " +
                format_shape(e.global_shape));
  piece_.resize(static_cast<std::size_t>(e.numel()) * sizeof(float));
  cut_piece(piece_record.partition, e.global_shape, sizeof(float), whole, piece_);
  if (!flat) {
    file.writer.write(piece_record, piece_);
    bytes_written_ += piece_.size();
    return;
  }
  // The data-parallel rank's range of the flat buffer, where it meets this parameter.
  const std::int64_t begin = std::max(file.shard.begin, e.offset);
  const std::int64_t end = std::min(file.shard.end, e.offset + e.numel());
  if (begin >= end) return;
  const std::int64_t offset = begin - e.offset;
  const std::int64_t length = end - begin;
  const auto bytes = std::span<const std::byte>(piece_).subspan(static_cast<std::size_t>(offset) * sizeof(float),
                                                                static_cast<std::size_t>(length) * sizeof(float));
  file.writer.write(parameter_range_record(path, e, tp, offset, length), bytes);
  bytes_written_ += bytes.size();
}

void LayoutShardWriters::write(const std::string& path, TensorDType dtype, std::span<const std::int64_t> global_shape,
                               std::span<const std::byte> whole) {
  bool optimizer_state = false;
  const std::string param = parameter_of(path, optimizer_state);
  if (param.empty()) {  // not a parameter's: whole, in every model shard
    const TensorRecord record = TensorRecord::whole(path, dtype, {global_shape.begin(), global_shape.end()});
    for (RankFile& file : model_files_) {
      file.writer.write(record, whole);
      bytes_written_ += whole.size();
    }
    return;
  }
  if (dtype != TensorDType::Float32)
    throw Error("tensor '" + path + "' is " + std::string(dtype_name(dtype)) + "; parameters are stored as float32");
  const bool flat = optimizer_state && !optimizer_files_.empty();
  bool held = false;
  for (RankFile& file : flat ? optimizer_files_ : model_files_) {
    const ParameterEntry* e = file.table->find(param);
    // The last stage's copy of a tied word embedding is the first stage's tensor: stored once.
    if (e == nullptr || e->pipeline_duplicate) continue;
    held = true;
    write_piece(file, path, *e, flat, global_shape, whole);
  }
  if (!held) throw Error("tensor '" + path + "' is not a parameter of the model");
}

void LayoutShardWriters::close() {
  for (RankFile& file : model_files_) file.writer.close();
  for (RankFile& file : optimizer_files_) file.writer.close();
}

}  // namespace mgt::ckpt
