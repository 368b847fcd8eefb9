// Writes one shard file of a checkpoint: metadata plus any number of tensors, each a chunked
// HDF5 dataset guarded by a Fletcher32 checksum per chunk, each carrying its TensorRecord as
// attributes. The file is meant to be written inside an IterationSave's staging directory: a
// writer that is not close()d leaves a file no one should read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt {

struct ShardWriterOptions {
  // Upper bound on one chunk. Checksums are per chunk, and a reader of part of a tensor (a
  // resharding tool taking some rows) decodes whole chunks; HDF5 itself caps chunks at 4 GiB.
  std::size_t max_chunk_bytes = std::size_t{8} << 20;
};

// A tensor to write: its record and its bytes (row-major, record.byte_size() of them).
struct TensorData {
  TensorRecord record;
  std::span<const std::byte> bytes;
};

class ShardWriter {
public:
  // Creates (or truncates) the file with mode 0640 (minus umask) and writes the metadata.
  ShardWriter(std::string path, const CheckpointMetadata& metadata, ShardWriterOptions options = {});
  ~ShardWriter();
  ShardWriter(ShardWriter&&) noexcept;
  ShardWriter& operator=(ShardWriter&&) noexcept;

  // Throws mgt::Error for an invalid record, a name written before, or a byte count that does
  // not match the record.
  void write(const TensorRecord& record, std::span<const std::byte> bytes);
  void write(const TensorData& tensor) { write(tensor.record, tensor.bytes); }

  // Closes the HDF5 file and fsyncs it. Nothing may be written afterwards.
  void close();

  const std::string& path() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A whole shard in one call.
void write_shard(const std::string& path, const CheckpointMetadata& metadata, std::span<const TensorData> tensors,
                 ShardWriterOptions options = {});

// The chunk shape used for a tensor: whole trailing dimensions as far as they fit in
// max_chunk_bytes, then the next one cut into as few equal slices as fit (HDF5 stores edge
// chunks whole, so equal slices waste at most a row each). Exposed for tests and sizing decisions.
std::vector<std::int64_t> chunk_shape_for(std::span<const std::int64_t> shape, std::size_t element_size,
                                          std::size_t max_chunk_bytes);

}  // namespace mgt::ckpt
