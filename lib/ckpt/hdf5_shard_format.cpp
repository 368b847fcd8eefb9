#include "ckpt/hdf5_shard_format.hpp"

#include <cstring>
#include <vector>

#include "ckpt/hdf5_attributes.hpp"
#include "ckpt/hdf5_error.hpp"
#include "ckpt/hdf5_handle.hpp"
#include "ckpt/hdf5_types.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/crc32c.hpp"
#include "core/error.hpp"

namespace mgt::ckpt::h5 {
namespace {

constexpr const char* kExtraGroup = "extra";

struct WorldField {
  const char* name;
  int WorldLayout::*field;
};
constexpr WorldField kWorldFields[] = {
    {"tensor_model_parallel_size", &WorldLayout::tensor_model_parallel_size},
    {"pipeline_model_parallel_size", &WorldLayout::pipeline_model_parallel_size},
    {"data_parallel_size", &WorldLayout::data_parallel_size},
    {"tensor_model_parallel_rank", &WorldLayout::tensor_model_parallel_rank},
    {"pipeline_model_parallel_rank", &WorldLayout::pipeline_model_parallel_rank},
    {"data_parallel_rank", &WorldLayout::data_parallel_rank},
};

// HDF5 checksums the chunks of the tensors and the small object headers, but not the heap where
// long attributes (the arguments' JSON) are kept: a flipped byte there changed the model's
// arguments unnoticed. The CRC-32C of every /meta attribute, each as name, NUL, value, NUL (the
// double by its bits), covers them; files written before it have none and are read as they are.
constexpr const char* kMetadataChecksum = "metadata_crc32c";

std::uint32_t metadata_checksum(const CheckpointMetadata& m) {
  std::uint32_t crc = 0;
  const auto add = [&crc](std::string_view name, std::string_view value) {
    crc = crc32c(name, crc);
    crc = crc32c(std::string_view("\0", 1), crc);
    crc = crc32c(value, crc);
    crc = crc32c(std::string_view("\0", 1), crc);
  };
  std::uint64_t flops_bits = 0;
  std::memcpy(&flops_bits, &m.num_floating_point_operations_so_far, sizeof flops_bits);
  add("format_version", std::to_string(m.format_version));
  add("iteration", std::to_string(m.iteration));
  add("consumed_train_samples", std::to_string(m.consumed_train_samples));
  add("consumed_valid_samples", std::to_string(m.consumed_valid_samples));
  add("num_floating_point_operations_so_far", std::to_string(flops_bits));
  add("args", m.args_json);
  add("tokenizer", m.tokenizer_json);
  add("opt_param_scheduler", m.scheduler_json);
  for (const auto& f : kWorldFields) add(f.name, std::to_string(m.world.*f.field));
  for (const auto& [key, json] : m.extra_json) add(std::string(kExtraGroup) + "/" + key, json);
  return crc;
}

Group create_group(hid_t parent, const char* name, const std::string& context) {
  auto gcpl = group_creation_properties(context);
  return Group(check_id(H5Gcreate2(parent, name, H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), "H5Gcreate2",
                        context + ", group '" + name + "'"));
}

bool has_link(hid_t parent, const char* name, const std::string& context) {
  htri_t exists = H5Lexists(parent, name, H5P_DEFAULT);
  check(exists, "H5Lexists", context);
  return exists > 0;
}

}  // namespace

void write_metadata(hid_t file, const CheckpointMetadata& m, const std::string& context) {
  const auto& w = m.world;
  auto rank_fits = [](int rank, int size) { return size >= 1 && rank >= 0 && rank < size; };
  if (!rank_fits(w.tensor_model_parallel_rank, w.tensor_model_parallel_size) ||
      !rank_fits(w.pipeline_model_parallel_rank, w.pipeline_model_parallel_size) ||
      !rank_fits(w.data_parallel_rank, w.data_parallel_size))
    throw Error(context + ": parallel ranks (tp " + std::to_string(w.tensor_model_parallel_rank) + ", pp " +
                std::to_string(w.pipeline_model_parallel_rank) + ", dp " + std::to_string(w.data_parallel_rank) +
                ") do not fit the sizes (" + std::to_string(w.tensor_model_parallel_size) + ", " +
                std::to_string(w.pipeline_model_parallel_size) + ", " + std::to_string(w.data_parallel_size) + ")");
  const std::string where = context + ", group '" + std::string(kMetaGroup) + "'";
  Group meta = create_group(file, std::string(kMetaGroup).c_str(), context);
  hid_t g = meta.get();
  write_string_attribute(g, "format", kFormatName, where);
  write_int64_attribute(g, "format_version", kFormatVersion, where);
  write_int64_attribute(g, "iteration", m.iteration, where);
  write_int64_attribute(g, "consumed_train_samples", m.consumed_train_samples, where);
  write_int64_attribute(g, "consumed_valid_samples", m.consumed_valid_samples, where);
  write_double_attribute(g, "num_floating_point_operations_so_far", m.num_floating_point_operations_so_far, where);
  write_string_attribute(g, "args", m.args_json, where);
  write_string_attribute(g, "tokenizer", m.tokenizer_json, where);
  write_string_attribute(g, "opt_param_scheduler", m.scheduler_json, where);
  for (const auto& f : kWorldFields) write_int64_attribute(g, f.name, m.world.*f.field, where);
  Group extra = create_group(g, kExtraGroup, where);
  for (const auto& [key, json] : m.extra_json) {
    if (key.empty()) throw Error(where + ": extra metadata needs a non-empty key");
    write_string_attribute(extra.get(), key.c_str(), json, where + "/" + kExtraGroup);
  }
  CheckpointMetadata written = m;
  written.format_version = kFormatVersion;
  write_int64_attribute(g, kMetadataChecksum, metadata_checksum(written), where);
}

CheckpointMetadata read_metadata(hid_t file, const std::string& context) {
  const std::string meta_name(kMetaGroup);
  if (!has_link(file, meta_name.c_str(), context))
    throw Error(context + " is not an mgt checkpoint shard: it has no '" + meta_name + "' group");
  const std::string where = context + ", group '" + meta_name + "'";
  Group meta(check_id(H5Gopen2(file, meta_name.c_str(), H5P_DEFAULT), "H5Gopen2", where));
  hid_t g = meta.get();
  if (!has_attribute(g, "format", where) || read_string_attribute(g, "format", where) != kFormatName)
    throw Error(context + " is not an mgt checkpoint shard: '" + meta_name + "' lacks format '" + kFormatName + "'");

  CheckpointMetadata m;
  m.format_version = read_int64_attribute(g, "format_version", where);
  if (m.format_version < 1 || m.format_version > kFormatVersion)
    throw Error(context + " has checkpoint format version " + std::to_string(m.format_version) +
                "; this mgt reads versions 1 to " + std::to_string(kFormatVersion));
  m.iteration = read_int64_attribute(g, "iteration", where);
  m.consumed_train_samples = read_int64_attribute(g, "consumed_train_samples", where);
  m.consumed_valid_samples = read_int64_attribute(g, "consumed_valid_samples", where);
  m.num_floating_point_operations_so_far = read_double_attribute(g, "num_floating_point_operations_so_far", where);
  m.args_json = read_string_attribute(g, "args", where);
  m.tokenizer_json = read_string_attribute(g, "tokenizer", where);
  m.scheduler_json = read_string_attribute(g, "opt_param_scheduler", where);
  for (const auto& f : kWorldFields) m.world.*f.field = static_cast<int>(read_int64_attribute(g, f.name, where));
  if (has_link(g, kExtraGroup, where)) {
    const std::string extra_where = where + "/" + kExtraGroup;
    Group extra(check_id(H5Gopen2(g, kExtraGroup, H5P_DEFAULT), "H5Gopen2", extra_where));
    for (const auto& key : attribute_names(extra.get(), extra_where))
      m.extra_json[key] = read_string_attribute(extra.get(), key.c_str(), extra_where);
  }
  if (has_attribute(g, kMetadataChecksum, where) &&
      read_int64_attribute(g, kMetadataChecksum, where) != static_cast<std::int64_t>(metadata_checksum(m)))
    throw Error(context + " is damaged: the attributes of its '" + meta_name +
                "' group (the arguments, tokenizer, scheduler and progress) fail their CRC-32C");
  return m;
}

void write_tensor_attributes(hid_t dataset, const TensorRecord& r, const std::string& context) {
  write_string_attribute(dataset, "dtype", dtype_name(r.dtype), context);
  write_int64_array_attribute(dataset, "global_shape", r.global_shape, context);
  write_int64_attribute(dataset, "partition_dim", r.partition.dim, context);
  write_int64_attribute(dataset, "partition_rank", r.partition.rank, context);
  write_int64_attribute(dataset, "partition_count", r.partition.count, context);
  // Absent means 1, so that files of format version 1 read as they were written.
  if (r.partition.chunks != 1) write_int64_attribute(dataset, "partition_chunks", r.partition.chunks, context);
  if (r.flat_range) {
    write_int64_attribute(dataset, "flat_offset", r.flat_range->offset, context);
    write_int64_attribute(dataset, "flat_length", r.flat_range->length, context);
  }
}

TensorRecord read_tensor_record(hid_t dataset, const std::string& name, const std::string& context) {
  TensorRecord r;
  r.name = name;
  const auto dtype_text = read_string_attribute(dataset, "dtype", context);
  auto dtype = dtype_from_name(dtype_text);
  if (!dtype) throw Error(context + ": unknown dtype '" + dtype_text + "'");
  r.dtype = *dtype;
  Datatype stored(check_id(H5Dget_type(dataset), "H5Dget_type", context));
  if (!stored_type_matches(stored.get(), r.dtype))
    throw Error(context + ": stored element type does not match its dtype attribute '" + dtype_text + "'");

  Dataspace space(check_id(H5Dget_space(dataset), "H5Dget_space", context));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw_error(context, "H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0)
    check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "H5Sget_simple_extent_dims", context);
  r.shape.assign(dims.begin(), dims.end());

  r.global_shape = read_int64_array_attribute(dataset, "global_shape", context);
  r.partition.dim = static_cast<int>(read_int64_attribute(dataset, "partition_dim", context));
  r.partition.rank = static_cast<int>(read_int64_attribute(dataset, "partition_rank", context));
  r.partition.count = static_cast<int>(read_int64_attribute(dataset, "partition_count", context));
  if (has_attribute(dataset, "partition_chunks", context))
    r.partition.chunks = static_cast<int>(read_int64_attribute(dataset, "partition_chunks", context));
  if (has_attribute(dataset, "flat_offset", context))
    r.flat_range = FlatRange{read_int64_attribute(dataset, "flat_offset", context),
                             read_int64_attribute(dataset, "flat_length", context)};
  return r;
}

}  // namespace mgt::ckpt::h5
