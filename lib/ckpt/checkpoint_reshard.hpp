// An mgt checkpoint rewritten at another parallel layout, with its optimizer state: Megatron's
// tools/checkpoint/convert.py --loader core --saver core with --target-tensor-parallel-size and
// --target-pipeline-parallel-size, plus the data-parallel layout of the distributed optimizer's
// state. Streams tensor by tensor (assemble one whole tensor from the source's pieces, cut it for
// every target file), so peak memory stays near the largest tensor whatever the model's size.
#pragma once
#include <cstdint>
#include <string>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/layout_shard_writers.hpp"

namespace mgt::ckpt {

class ShardedCheckpoint;

// The layout `checkpoint` was stored at (a checkpoint of whole tensors counts as one rank).
TargetLayout stored_layout(const ShardedCheckpoint& checkpoint);

struct ReshardResult {
  std::string source;       // the iteration directory read
  std::string destination;  // the iteration directory written
  TargetLayout source_layout;
  std::int64_t tensors = 0;
  std::uint64_t bytes_read = 0;     // whole tensors assembled
  std::uint64_t bytes_written = 0;  // pieces written
  std::size_t files_written = 0;
  double seconds = 0.0;
};

// `load`: a save directory (its tracker picks the iteration) or an iteration directory;
// `save_dir` must not exist or be empty and is written like a training save (staging directory,
// rename, tracker). `progress_interval`: tensors between progress lines off a terminal.
ReshardResult reshard_checkpoint(const std::string& load, const std::string& save_dir, const TargetLayout& layout,
                                 std::uint64_t progress_interval = 0);

}  // namespace mgt::ckpt
