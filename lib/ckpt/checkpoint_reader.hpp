// Reads one shard file of a checkpoint. Opening checks that the file is a complete HDF5 file
// written by mgt and lists its tensors; reads check the caller's expectations (dtype, shape)
// before touching data, and HDF5 verifies every chunk's Fletcher32 checksum on the way in.
// Every error is an mgt::Error naming the file and, where there is one, the tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt {

// Where a chunk of a tensor lies in the file (its stored bytes include the 4-byte checksum).
struct StoredChunk {
  std::uint64_t file_offset = 0;
  std::uint64_t size = 0;
};

class ShardReader {
public:
  explicit ShardReader(std::string path);
  ~ShardReader();
  ShardReader(ShardReader&&) noexcept;
  ShardReader& operator=(ShardReader&&) noexcept;

  const std::string& path() const;
  const CheckpointMetadata& metadata() const;

  // All tensors, group by group in the order the groups were created, each group's tensors in
  // the order they were written (a model's parameters keep their natural order).
  const std::vector<TensorRecord>& tensors() const;
  // Names of the tensors under a group ("model", "optimizer/exp_avg"), in write order.
  std::vector<std::string> tensor_names(std::string_view group) const;
  bool contains(std::string_view name) const;
  // Throws mgt::Error naming the file when there is no such tensor.
  const TensorRecord& tensor(std::string_view name) const;

  // Reads a whole tensor into `out` after checking that it has the dtype and shape the caller
  // expects and that `out` has exactly its size.
  void read(std::string_view name, TensorDType dtype, std::span<const std::int64_t> shape,
            std::span<std::byte> out) const;
  // Reads a whole tensor whatever its shape (RNG states, blobs).
  std::vector<std::byte> read_bytes(std::string_view name) const;

  std::vector<StoredChunk> stored_chunks(std::string_view name) const;
  // Reads every tensor, so that every checksum is checked; throws on the first failure.
  void verify() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt::ckpt
