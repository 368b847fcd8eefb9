#include "ckpt/checkpoint_reader.hpp"

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <utility>

#include "ckpt/hdf5_error.hpp"
#include "ckpt/hdf5_handle.hpp"
#include "ckpt/hdf5_shard_format.hpp"
#include "ckpt/hdf5_types.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {
namespace {

// Whether a group indexes its links by creation order (mgt's writer makes every group so).
bool indexes_creation_order(hid_t group, const std::string& where) {
  h5::PropertyList gcpl(h5::check_id(H5Gget_create_plist(group), "H5Gget_create_plist", where));
  unsigned flags = 0;
  h5::check(H5Pget_link_creation_order(gcpl.get(), &flags), "H5Pget_link_creation_order", where);
  return (flags & H5P_CRT_ORDER_INDEXED) != 0;
}

// An HDF5 callback: nothing may propagate out of it.
herr_t append_link_name(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* names) noexcept {
  try {
    static_cast<std::vector<std::string>*>(names)->emplace_back(name);
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // namespace

struct ShardReader::Impl {
  std::string path;
  std::string context;  // "checkpoint file 'PATH'"
  h5::File file;
  CheckpointMetadata metadata;
  std::vector<TensorRecord> tensors;
  std::map<std::string, std::size_t, std::less<>> index;

  std::string tensor_context(std::string_view name) const {
    return "checkpoint tensor '" + std::string(name) + "' in '" + path + "'";
  }

  // Link names of a group in creation order; name order for groups that do not index it.
  //
  // Never through HDF5 1.10's table of links (H5Lget_name_by_idx by name, or by creation order
  // without its index, builds one): when a damaged heap block fails its checksum half way
  // through building it, HDF5 frees the names of the entries it never filled, and the process
  // aborts in free() or corrupts its heap. The creation-order index is looked up directly, and
  // other groups are walked in their native order and sorted here.
  std::vector<std::string> link_names(hid_t group, const std::string& where) const {
    std::vector<std::string> names;
    if (!indexes_creation_order(group, where)) {
      if (H5Literate(group, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, append_link_name, &names) < 0)
        h5::throw_error(where, "H5Literate");
      std::sort(names.begin(), names.end());
      return names;
    }
    H5G_info_t info;
    h5::check(H5Gget_info(group, &info), "H5Gget_info", where);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t length = H5Lget_name_by_idx(group, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (length < 0) h5::throw_error(where, "H5Lget_name_by_idx");
      std::string name(static_cast<std::size_t>(length) + 1, '\0');
      if (H5Lget_name_by_idx(group, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0)
        h5::throw_error(where, "H5Lget_name_by_idx");
      name.resize(static_cast<std::size_t>(length));
      names.push_back(std::move(name));
    }
    return names;
  }

  void collect_tensors(hid_t group, const std::string& prefix) {
    const std::string where = context + (prefix.empty() ? "" : ", group '" + prefix + "'");
    for (const auto& name : link_names(group, where)) {
      if (prefix.empty() && name == kMetaGroup) continue;
      const std::string full = prefix.empty() ? name : prefix + "/" + name;
      h5::Object object(h5::check_id(H5Oopen(group, name.c_str(), H5P_DEFAULT), "H5Oopen",
                                     context + ", object '" + full + "'"));
      H5I_type_t type = H5Iget_type(object.get());
      if (type == H5I_GROUP) {
        collect_tensors(object.get(), full);
      } else if (type == H5I_DATASET) {
        index.emplace(full, tensors.size());
        tensors.push_back(h5::read_tensor_record(object.get(), full, tensor_context(full)));
      }
    }
  }

  const TensorRecord& find(std::string_view name) const {
    auto it = index.find(name);
    if (it == index.end())
      throw Error("checkpoint file '" + path + "' has no tensor '" + std::string(name) + "'");
    return tensors[it->second];
  }

  h5::Dataset open_dataset(std::string_view name) const {
    return h5::Dataset(h5::check_id(H5Dopen2(file.get(), std::string(name).c_str(), H5P_DEFAULT), "H5Dopen2",
                                    "cannot open " + tensor_context(name)));
  }

  void read_into(const TensorRecord& record, std::span<std::byte> out) const {
    if (out.empty()) return;
    h5::Dataset dataset = open_dataset(record.name);
    h5::check(H5Dread(dataset.get(), h5::memory_type_of(record.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
              "H5Dread", "cannot read " + tensor_context(record.name));
  }
};

ShardReader::ShardReader(std::string path) : impl_(std::make_unique<Impl>()) {
  h5::silence_errors();
  auto& s = *impl_;
  s.path = std::move(path);
  s.context = "checkpoint file '" + s.path + "'";
  struct stat st;
  if (::stat(s.path.c_str(), &st) != 0) throw Error(system_error_message("cannot open checkpoint file", s.path));
  if (!S_ISREG(st.st_mode)) throw Error(s.context + " is not a regular file");
  htri_t is_hdf5 = H5Fis_hdf5(s.path.c_str());
  if (is_hdf5 == 0) throw Error(s.context + " is not an HDF5 file (damaged, or of another format)");
  if (is_hdf5 < 0) h5::throw_error("cannot open " + s.context, "H5Fis_hdf5");
  auto fapl = h5::file_access_properties(s.context);
  s.file = h5::File(h5::check_id(H5Fopen(s.path.c_str(), H5F_ACC_RDONLY, fapl.get()), "H5Fopen",
                                 "cannot open " + s.context));
  s.metadata = h5::read_metadata(s.file.get(), s.context);
  h5::Group root(h5::check_id(H5Gopen2(s.file.get(), "/", H5P_DEFAULT), "H5Gopen2", s.context));
  s.collect_tensors(root.get(), "");
}

ShardReader::~ShardReader() = default;
ShardReader::ShardReader(ShardReader&&) noexcept = default;
ShardReader& ShardReader::operator=(ShardReader&&) noexcept = default;

const std::string& ShardReader::path() const { return impl_->path; }
const CheckpointMetadata& ShardReader::metadata() const { return impl_->metadata; }
const std::vector<TensorRecord>& ShardReader::tensors() const { return impl_->tensors; }

std::vector<std::string> ShardReader::tensor_names(std::string_view group) const {
  std::string prefix(group);
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  std::vector<std::string> names;
  for (const auto& record : impl_->tensors)
    if (record.name.starts_with(prefix)) names.push_back(record.name);
  return names;
}

bool ShardReader::contains(std::string_view name) const { return impl_->index.contains(name); }

const TensorRecord& ShardReader::tensor(std::string_view name) const { return impl_->find(name); }

void ShardReader::read(std::string_view name, TensorDType dtype, std::span<const std::int64_t> shape,
                       std::span<std::byte> out) const {
  h5::silence_errors();
  const auto& s = *impl_;
  const TensorRecord& record = s.find(name);
  const std::string file_note = " (file '" + s.path + "')";
  if (record.dtype != dtype)
    throw Error("checkpoint tensor '" + record.name + "' has dtype " + std::string(dtype_name(record.dtype)) +
                " but the model expects " + std::string(dtype_name(dtype)) + file_note);
  if (!std::equal(record.shape.begin(), record.shape.end(), shape.begin(), shape.end()))
    throw Error("checkpoint tensor '" + record.name + "' has shape " + format_shape(record.shape) +
                " but the model expects " + format_shape(shape) + file_note);
  if (out.size() != record.byte_size())
    throw Error("buffer for checkpoint tensor '" + record.name + "' holds " + std::to_string(out.size()) +
                " bytes, the tensor needs " + std::to_string(record.byte_size()) + file_note);
  s.read_into(record, out);
}

std::vector<std::byte> ShardReader::read_bytes(std::string_view name) const {
  h5::silence_errors();
  const TensorRecord& record = impl_->find(name);
  std::vector<std::byte> bytes(record.byte_size());
  impl_->read_into(record, bytes);
  return bytes;
}

std::vector<StoredChunk> ShardReader::stored_chunks(std::string_view name) const {
  h5::silence_errors();
  const auto& s = *impl_;
  const TensorRecord& record = s.find(name);
  const std::string where = s.tensor_context(record.name);
  h5::Dataset dataset = s.open_dataset(record.name);
  h5::PropertyList dcpl(h5::check_id(H5Dget_create_plist(dataset.get()), "H5Dget_create_plist", where));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return {};
  h5::Dataspace space(h5::check_id(H5Dget_space(dataset.get()), "H5Dget_space", where));
  hsize_t count = 0;
  h5::check(H5Dget_num_chunks(dataset.get(), space.get(), &count), "H5Dget_num_chunks", where);
  std::vector<StoredChunk> chunks;
  std::vector<hsize_t> coordinates(record.shape.size());
  for (hsize_t i = 0; i < count; ++i) {
    unsigned filter_mask = 0;
    haddr_t address = 0;
    hsize_t size = 0;
    h5::check(H5Dget_chunk_info(dataset.get(), space.get(), i, coordinates.data(), &filter_mask, &address, &size),
              "H5Dget_chunk_info", where);
    chunks.push_back({static_cast<std::uint64_t>(address), static_cast<std::uint64_t>(size)});
  }
  return chunks;
}

void ShardReader::verify() const {
  for (const auto& record : impl_->tensors) read_bytes(record.name);
}

}  // namespace mgt::ckpt
