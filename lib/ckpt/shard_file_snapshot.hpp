// One rank's checkpoint files as host memory: each file's metadata and its tensors' records and
// bytes, copied off the live state at the save iteration, and the writing of those files later.
// Saving is these two steps in a row; with --async-save the second runs on a thread while
// training changes the live state (the host copy Megatron's async save takes before its writer
// runs, megatron/core/dist_checkpointing/strategies/filesystem_async.py). The same snapshot gives
// the same files whichever way it is written.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt {

// A tensor's bytes in host memory; the vector they were taken from moves in, so no copy is made.
class HostBytes {
public:
  HostBytes() = default;
  template <typename T>
  explicit HostBytes(std::vector<T> values) {
    auto owned = std::make_shared<const std::vector<T>>(std::move(values));
    bytes_ = std::as_bytes(std::span<const T>(*owned));
    owner_ = std::move(owned);
  }
  std::span<const std::byte> bytes() const { return bytes_; }

private:
  std::shared_ptr<const void> owner_;
  std::span<const std::byte> bytes_;
};

struct SnapshotTensor {
  TensorRecord record;
  HostBytes data;
};

struct ShardFileSnapshot {
  std::string file_name;  // inside the checkpoint directory: shard_file_name(id)
  CheckpointMetadata metadata;
  std::vector<SnapshotTensor> tensors;  // in the order they are written
};

struct SnapshotWriteOptions {
  // Called with each file's path once its tensors are written, before it is closed and synced
  // (a test's way to hold a save mid-write).
  std::function<void(const std::string& path)> before_close;
};

// Writes every file into `dir` (each closed and fsynced, ShardWriter::close) and returns the
// bytes the files hold. Throws mgt::Error naming the file that could not be written.
std::uint64_t write_shard_snapshots(const std::string& dir, std::span<const ShardFileSnapshot> files,
                                    const SnapshotWriteOptions& options = {});

}  // namespace mgt::ckpt
