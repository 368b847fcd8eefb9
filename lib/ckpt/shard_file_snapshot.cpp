#include "ckpt/shard_file_snapshot.hpp"

#include <sys/stat.h>

#include "ckpt/checkpoint_writer.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {

void ShardSnapshotCollector::begin_file(const std::string& file_name, const CheckpointMetadata& metadata) {
  files_.push_back({file_name, metadata, {}});
}

void ShardSnapshotCollector::tensor(SnapshotTensor tensor) {
  if (files_.empty()) throw Error("internal error: a checkpoint tensor before its file");
  files_.back().tensors.push_back(std::move(tensor));
}

ShardFilesWriter::ShardFilesWriter(std::string dir, SnapshotWriteOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {}

ShardFilesWriter::~ShardFilesWriter() = default;  // an unfinished file stays unsynced: its save is abandoned

void ShardFilesWriter::begin_file(const std::string& file_name, const CheckpointMetadata& metadata) {
  close_current();
  path_ = dir_ + "/" + file_name;
  writer_ = std::make_unique<ShardWriter>(path_, metadata);
}

void ShardFilesWriter::tensor(SnapshotTensor tensor) {
  if (!writer_) throw Error("internal error: a checkpoint tensor before its file");
  writer_->write(tensor.record, tensor.data.bytes());
}

void ShardFilesWriter::close_current() {
  if (!writer_) return;
  if (options_.before_close) options_.before_close(path_);
  writer_->close();
  writer_.reset();
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) throw Error(system_error_message("cannot stat checkpoint file", path_));
  bytes_ += static_cast<std::uint64_t>(st.st_size);
}

std::uint64_t ShardFilesWriter::finish() {
  close_current();
  return bytes_;
}

std::uint64_t write_shard_snapshots(const std::string& dir, std::span<const ShardFileSnapshot> files,
                                    const SnapshotWriteOptions& options) {
  ShardFilesWriter writer(dir, options);
  for (const ShardFileSnapshot& file : files) {
    writer.begin_file(file.file_name, file.metadata);
    for (const SnapshotTensor& tensor : file.tensors) writer.tensor(tensor);
  }
  return writer.finish();
}

}  // namespace mgt::ckpt
