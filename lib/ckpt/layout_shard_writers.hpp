// The shard files of a checkpoint at a chosen parallel layout, written tensor by tensor: each
// whole tensor handed in is cut into the piece every file of the layout holds (tensor-parallel
// slices by the parameter table of the target rank, the pipeline stage's layers, and with the
// distributed optimizer each data-parallel rank's flat range of the optimizer state), the way
// Megatron's tools/checkpoint/saver_core.py re-chunks full tensors for its target sizes. Used by
// converters, so peak memory stays one whole tensor plus one piece.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "dist/buffer_shards.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_table.hpp"

namespace mgt::ckpt {

struct TargetLayout {
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  int data_parallel_size = 1;
  // The optimizer state goes into one file per data-parallel rank (when data_parallel_size > 1).
  bool distributed_optimizer = false;
  bool operator==(const TargetLayout&) const = default;
};

// Throws mgt::UsageError naming the flag when `config` cannot be split so.
void validate_target_layout(const GptConfig& config, const TargetLayout& layout);

// extra_json["parallel_layout"] for a checkpoint of `layout`.
std::string parallel_layout_json(const TargetLayout& layout, bool sequence_parallel = false);

class LayoutShardWriters {
public:
  // Creates every file of `layout` in `dir` (a staging directory), each with `metadata` and its
  // own coordinates in metadata.world.
  LayoutShardWriters(const std::string& dir, const GptConfig& config, const TargetLayout& layout,
                     CheckpointMetadata metadata);
  // `path` is "model/<param>" or "optimizer/<state>/<param>" for a parameter of the model (fp32,
  // its global shape), anything else (random state) goes whole into every model shard.
  void write(const std::string& path, TensorDType dtype, std::span<const std::int64_t> global_shape,
             std::span<const std::byte> whole);
  void close();
  std::uint64_t bytes_written() const { return bytes_written_; }
  std::size_t file_count() const { return model_files_.size() + optimizer_files_.size(); }

private:
  struct RankFile {
    int tensor_rank = 0;
    int pipeline_rank = 0;
    const ParameterTable* table = nullptr;
    mgt::BufferShard shard;  // the data-parallel range of the table's buffer (optimizer files)
    ShardWriter writer;
  };
  void write_piece(RankFile& file, const std::string& path, const ParameterEntry& entry, bool flat,
                   std::span<const std::int64_t> global_shape, std::span<const std::byte> whole);

  TargetLayout layout_;
  std::vector<ParameterTable> tables_;  // [tensor rank · pipeline size + pipeline rank]
  std::vector<RankFile> model_files_;
  std::vector<RankFile> optimizer_files_;  // distributed optimizer, data-parallel size > 1
  std::vector<std::byte> piece_;
  std::uint64_t bytes_written_ = 0;
};

}  // namespace mgt::ckpt
