#include "ckpt/sharded_checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/tensor_pieces.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {

ShardedCheckpoint::ShardedCheckpoint(std::string directory) : directory_(std::move(directory)) {
  const std::vector<std::string> files = list_shard_files(directory_);
  if (files.empty())
    throw Error("checkpoint " + directory_ + " holds no " + shard_file_name({}) + " or other shard file");
  readers_.reserve(files.size());
  const auto name = [](const std::string& path) { return std::filesystem::path(path).filename().string(); };
  for (const std::string& path : files) {
    readers_.emplace_back(path);
    const CheckpointMetadata& meta = readers_.back().metadata();
    const CheckpointMetadata& first = readers_.front().metadata();
    if (meta.iteration != first.iteration)
      throw Error("checkpoint " + directory_ + ": " + name(path) + " is of iteration " +
                  std::to_string(meta.iteration) + ", " + name(files.front()) + " of iteration " +
                  std::to_string(first.iteration));
    // Shards copied in from another run, or from another layout, would be assembled into a
    // model that neither run trained.
    if (meta.args_json != first.args_json)
      throw Error("checkpoint " + directory_ + ": " + name(path) + " and " + name(files.front()) +
                  " were saved by different runs (their arguments differ)");
    const WorldLayout& w = meta.world;
    const WorldLayout& w0 = first.world;
    if (w.tensor_model_parallel_size != w0.tensor_model_parallel_size ||
        w.pipeline_model_parallel_size != w0.pipeline_model_parallel_size ||
        w.data_parallel_size != w0.data_parallel_size)
      throw Error("checkpoint " + directory_ + ": " + name(path) + " and " + name(files.front()) +
                  " were saved in different parallel layouts");
    // A shard's name says which rank wrote it; a file copied under another rank's name says so too.
    if (const std::optional<ShardId> id = parse_shard_file_name(name(path))) {
      const bool agrees = id->tensor_rank == w.tensor_model_parallel_rank &&
                          id->pipeline_rank.value_or(w.pipeline_model_parallel_rank) == w.pipeline_model_parallel_rank &&
                          id->data_parallel_rank.value_or(w.data_parallel_rank) == w.data_parallel_rank;
      if (!agrees)
        throw Error("checkpoint " + directory_ + ": " + name(path) + " holds the part of tensor rank " +
                    std::to_string(w.tensor_model_parallel_rank) + ", pipeline rank " +
                    std::to_string(w.pipeline_model_parallel_rank) + " and data rank " +
                    std::to_string(w.data_parallel_rank) + ", which its name does not (a copied file?)");
    }
  }
  // An iteration directory holds that iteration's shards (not those of another one moved in).
  std::filesystem::path where = std::filesystem::path(directory_).lexically_normal();
  if (!where.has_filename()) where = where.parent_path();  // "iter_0000004/"
  const std::int64_t iteration = readers_.front().metadata().iteration;
  const std::optional<std::int64_t> named = parse_iteration_directory_name(where.filename().string());
  if (named && *named != iteration)
    throw Error("checkpoint " + directory_ + " holds the shards of iteration " + std::to_string(iteration));
  for (std::size_t f = 0; f < readers_.size(); ++f)
    for (const TensorRecord& record : readers_[f].tensors()) {
      auto [it, inserted] = pieces_.try_emplace(record.name);
      if (inserted) order_.push_back(record.name);
      const TensorRecord& first = it->second.empty() ? record : *it->second.front().record;
      if (record.dtype != first.dtype || record.global_shape != first.global_shape)
        throw Error("checkpoint " + directory_ + ": tensor '" + record.name + "' is " +
                    std::string(dtype_name(record.dtype)) + " " + format_shape(record.global_shape) + " in " +
                    readers_[f].path() + " but " + std::string(dtype_name(first.dtype)) + " " +
                    format_shape(first.global_shape) + " elsewhere");
      it->second.push_back({f, &record});
    }
}

std::vector<std::string> ShardedCheckpoint::tensor_names(std::string_view group) const {
  std::string prefix(group);
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  std::vector<std::string> names;
  for (const std::string& name : order_)
    if (name.starts_with(prefix)) names.push_back(name);
  return names;
}

const std::vector<ShardedCheckpoint::Piece>& ShardedCheckpoint::pieces_of(std::string_view name) const {
  auto it = pieces_.find(std::string(name));
  if (it == pieces_.end()) throw Error("checkpoint " + directory_ + " has no tensor '" + std::string(name) + "'");
  return it->second;
}

TensorDType ShardedCheckpoint::dtype(std::string_view name) const { return pieces_of(name).front().record->dtype; }

const std::vector<std::int64_t>& ShardedCheckpoint::global_shape(std::string_view name) const {
  return pieces_of(name).front().record->global_shape;
}

std::size_t ShardedCheckpoint::whole_byte_size(std::string_view name) const {
  const TensorRecord& r = *pieces_of(name).front().record;
  return static_cast<std::size_t>(element_count(r.global_shape)) * dtype_size(r.dtype);
}

void ShardedCheckpoint::read_piece(const std::vector<const Piece*>& candidates, const TensorRecord& first,
                                   std::span<std::byte> piece) const {
  // A piece stored whole (one copy is enough: replicated tensors repeat in every tensor rank's file).
  for (const Piece* p : candidates)
    if (!p->record->flat_range) {
      readers_[p->file].read(p->record->name, p->record->dtype, p->record->shape, piece);
      return;
    }
  // Flat ranges: the data-parallel ranks' shards of one model-parallel rank's copy. A replicated
  // tensor has such a set per tensor-parallel rank; any one set covers the piece.
  std::vector<const Piece*> ranges = candidates;
  std::stable_sort(ranges.begin(), ranges.end(), [](const Piece* a, const Piece* b) {
    return a->record->flat_range->offset < b->record->flat_range->offset;
  });
  const std::size_t element = dtype_size(first.dtype);
  const auto total = static_cast<std::int64_t>(piece.size() / element);
  std::int64_t covered = 0;
  for (const Piece* p : ranges) {
    const FlatRange& f = *p->record->flat_range;
    if (f.offset > covered) break;  // a gap
    if (f.offset + f.length <= covered) continue;  // another copy of what is read already
    std::vector<std::byte> bytes = readers_[p->file].read_bytes(p->record->name);
    const std::int64_t skip = covered - f.offset;
    std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(skip * static_cast<std::int64_t>(element)), bytes.end(),
              piece.begin() + static_cast<std::ptrdiff_t>(covered * static_cast<std::int64_t>(element)));
    covered = f.offset + f.length;
  }
  if (covered < total)
    throw Error("checkpoint " + directory_ + ": the stored pieces of tensor '" + first.name + "' (partition piece " +
                std::to_string(first.partition.rank) + " of " + std::to_string(first.partition.count) +
                ") cover " + std::to_string(covered) + " of its " + std::to_string(total) +
                " elements; a data-parallel shard file is missing");
}

void ShardedCheckpoint::read_whole(std::string_view name, TensorDType dtype, std::span<const std::int64_t> shape,
                                   std::span<std::byte> out) const {
  const std::vector<Piece>& pieces = pieces_of(name);
  const TensorRecord& first = *pieces.front().record;
  const std::string file_note = " (checkpoint " + directory_ + ")";
  if (first.dtype != dtype)
    throw Error("checkpoint tensor '" + first.name + "' has dtype " + std::string(dtype_name(first.dtype)) +
                " but the model expects " + std::string(dtype_name(dtype)) + file_note);
  if (!std::equal(first.global_shape.begin(), first.global_shape.end(), shape.begin(), shape.end()))
    throw Error("checkpoint tensor '" + first.name + "' has shape " + format_shape(first.global_shape) +
                " but the model expects " + format_shape(shape) + file_note);
  if (out.size() != whole_byte_size(name))
    throw Error("buffer for checkpoint tensor '" + first.name + "' holds " + std::to_string(out.size()) +
                " bytes, the tensor needs " + std::to_string(whole_byte_size(name)) + file_note);

  // The tensor-parallel split the pieces follow: the first partitioned piece's, else whole.
  TensorPartition split;
  for (const Piece& p : pieces)
    if (p.record->partition.dim >= 0 && p.record->partition.count > 1) {
      split = p.record->partition;
      break;
    }
  const std::size_t element = dtype_size(dtype);
  std::vector<std::byte> scratch;
  for (int rank = 0; rank < split.count; ++rank) {
    std::vector<const Piece*> candidates;
    for (const Piece& p : pieces) {
      const TensorPartition& q = p.record->partition;
      const bool whole_copy = q.dim < 0 || q.count == 1;
      if (split.count == 1 ? whole_copy
                           : (q.dim == split.dim && q.count == split.count && q.chunks == split.chunks && q.rank == rank))
        candidates.push_back(&p);
    }
    if (candidates.empty())
      throw Error("checkpoint " + directory_ + " lacks piece " + std::to_string(rank) + " of " +
                  std::to_string(split.count) + " of tensor '" + first.name + "' (a shard file is missing)");
    if (split.count == 1) {
      read_piece(candidates, first, out);
      return;
    }
    TensorPartition piece_partition = split;
    piece_partition.rank = rank;
    scratch.resize(out.size() / static_cast<std::size_t>(split.count));
    read_piece(candidates, *candidates.front()->record, scratch);
    place_piece(piece_partition, first.global_shape, element, scratch, out);
  }
}

std::vector<std::byte> ShardedCheckpoint::read_whole_bytes(std::string_view name) const {
  std::vector<std::byte> bytes(whole_byte_size(name));
  read_whole(name, dtype(name), global_shape(name), bytes);
  return bytes;
}

}  // namespace mgt::ckpt
