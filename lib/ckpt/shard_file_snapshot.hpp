// One rank's checkpoint files as they are taken from the live state: each file's metadata and its
// tensors' records and bytes in host memory, handed to a sink that writes them at once (a
// synchronous save, one tensor in memory at a time) or keeps them all (a snapshot) for a thread
// to write while training changes the live state (--async-save: the host copy Megatron's async
// save takes before its writer runs, megatron/core/dist_checkpointing/strategies/
// filesystem_async.py). The same tensors in the same order give the same files either way.
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

class ShardWriter;

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

// Where a rank's checkpoint files go, file by file and tensor by tensor, as they are taken from
// the live state: into host memory (ShardSnapshotCollector, for a background write) or straight
// into the files (ShardFilesWriter, holding one tensor at a time).
class ShardFileSink {
public:
  virtual ~ShardFileSink() = default;
  // The files come one after the other: a file's tensors follow its begin_file.
  virtual void begin_file(const std::string& file_name, const CheckpointMetadata& metadata) = 0;
  virtual void tensor(SnapshotTensor tensor) = 0;
};

class ShardSnapshotCollector final : public ShardFileSink {
public:
  void begin_file(const std::string& file_name, const CheckpointMetadata& metadata) override;
  void tensor(SnapshotTensor tensor) override;
  std::vector<ShardFileSnapshot> take() { return std::move(files_); }

private:
  std::vector<ShardFileSnapshot> files_;
};

// Writes the files into `dir` (ShardWriter: each closed and fsynced before the next begins).
// Throws mgt::Error naming the file that could not be written.
class ShardFilesWriter final : public ShardFileSink {
public:
  explicit ShardFilesWriter(std::string dir, SnapshotWriteOptions options = {});
  ~ShardFilesWriter() override;
  void begin_file(const std::string& file_name, const CheckpointMetadata& metadata) override;
  void tensor(SnapshotTensor tensor) override;
  // Closes the last file; returns the bytes the files hold.
  std::uint64_t finish();

private:
  void close_current();

  std::string dir_;
  SnapshotWriteOptions options_;
  std::string path_;
  std::unique_ptr<ShardWriter> writer_;
  std::uint64_t bytes_ = 0;
};

// Writes every file of a snapshot into `dir`; returns the bytes the files hold.
std::uint64_t write_shard_snapshots(const std::string& dir, std::span<const ShardFileSnapshot> files,
                                    const SnapshotWriteOptions& options = {});

}  // namespace mgt::ckpt
