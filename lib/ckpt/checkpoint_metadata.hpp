// The non-tensor state of a checkpoint shard: where training stood, how it was configured, and
// which piece of the parallel layout wrote this shard. Every shard carries all of it, so any
// one shard is enough to resume the bookkeeping and to know how the run was partitioned.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace mgt::ckpt {

// Version of the shard file layout written by this code; readers refuse newer versions.
// 1: whole tensors written by rank 0. 2: each rank writes its own piece of each tensor
// (partition_chunks for fused tensors, flat ranges inside tensor-parallel pieces for the
// distributed optimizer); version 1 files read the same way, as pieces that are whole.
inline constexpr std::int64_t kFormatVersion = 2;

// Megatron's parallel sizes, and this shard's coordinates in them.
struct WorldLayout {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int data_parallel_size = 1;
  int tensor_model_parallel_rank = 0;
  int pipeline_model_parallel_rank = 0;
  int data_parallel_rank = 0;
  bool operator==(const WorldLayout&) const = default;
};

struct CheckpointMetadata {
  std::int64_t iteration = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  // A double like Megatron's: the count passes 2^63 on long runs.
  double num_floating_point_operations_so_far = 0.0;
  std::string args_json = "{}";          // the run's arguments, Megatron flag names as keys
  std::string tokenizer_json = "{}";     // enough to rebuild the tokenizer (type, files, vocab size)
  std::string scheduler_json = "{}";     // learning-rate / weight-decay scheduler state
  std::map<std::string, std::string> extra_json;  // anything else, e.g. optimizer scalars, grad scaler
  WorldLayout world;
  // Filled in by the reader: the version the file was written with.
  std::int64_t format_version = kFormatVersion;

  bool operator==(const CheckpointMetadata&) const = default;
};

}  // namespace mgt::ckpt
