// One iteration directory read as a whole, whichever layout wrote it: every shard file is opened,
// and a tensor is assembled from the pieces the files hold (tensor-parallel slices, the
// distributed optimizer's flat ranges, or one whole copy as rank 0 wrote it before format
// version 2). So a run of any layout, a converter and the inference programs read any
// checkpoint, like Megatron's torch_dist loading of global tensors
// (megatron/core/dist_checkpointing/serialization.py). Host memory: one whole tensor at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt {

class ShardedCheckpoint {
public:
  // Opens every shard file of `directory`; mgt::Error when there is none, or when the files
  // disagree on the iteration.
  explicit ShardedCheckpoint(std::string directory);

  const std::string& directory() const { return directory_; }
  // The first model shard's metadata (every shard carries the same bookkeeping); its `world`
  // holds the sizes of the layout that wrote the checkpoint.
  const CheckpointMetadata& metadata() const { return readers_.front().metadata(); }
  std::size_t file_count() const { return readers_.size(); }

  bool contains(std::string_view name) const { return pieces_.contains(std::string(name)); }
  // Tensor names under `group` ("model", "optimizer/exp_avg"; empty: all), in the order the
  // files hold them (files in name order, so a pipeline's stages come in model order).
  std::vector<std::string> tensor_names(std::string_view group = {}) const;
  // The dtype and global shape of a tensor (mgt::Error naming the directory when absent).
  TensorDType dtype(std::string_view name) const;
  const std::vector<std::int64_t>& global_shape(std::string_view name) const;
  std::size_t whole_byte_size(std::string_view name) const;

  // Assembles the whole tensor into `out` after checking dtype and global shape; mgt::Error
  // naming the tensor when the pieces do not cover it.
  void read_whole(std::string_view name, TensorDType dtype, std::span<const std::int64_t> global_shape,
                  std::span<std::byte> out) const;
  std::vector<std::byte> read_whole_bytes(std::string_view name) const;

private:
  struct Piece {
    std::size_t file = 0;  // index into readers_
    const TensorRecord* record = nullptr;
  };
  const std::vector<Piece>& pieces_of(std::string_view name) const;
  // One tensor-parallel piece (partition rank `rank`) of a tensor, from whole records or flat ranges.
  void read_piece(const std::vector<const Piece*>& candidates, const TensorRecord& first,
                  std::span<std::byte> piece) const;

  std::string directory_;
  std::vector<ShardReader> readers_;
  std::vector<std::string> order_;
  std::map<std::string, std::vector<Piece>> pieces_;
};

}  // namespace mgt::ckpt
