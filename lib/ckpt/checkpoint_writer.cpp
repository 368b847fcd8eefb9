#include "ckpt/checkpoint_writer.hpp"

#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>
#include <utility>

#include "ckpt/checkpoint_files.hpp"
#include "ckpt/fletcher32.hpp"
#include "ckpt/hdf5_error.hpp"
#include "ckpt/hdf5_handle.hpp"
#include "ckpt/hdf5_shard_format.hpp"
#include "ckpt/hdf5_types.hpp"
#include "ckpt/hdf5_write_driver.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {

struct ShardWriter::Impl {
  std::string path;
  std::string context;  // "checkpoint file 'PATH'"
  ShardWriterOptions options;
  // Declared before the file: the file is closed before its driver goes.
  h5::DeferredErrorDriver driver;
  h5::File file;
  std::set<std::string> groups;   // groups created so far
  std::set<std::string> tensors;  // names written so far
  std::vector<std::byte> chunk_buffer;  // write_chunks' chunk and checksum, reused

  // Throws the first write the disk refused (a full disk), if any. HDF5 never sees those fail
  // (hdf5_write_driver.hpp), so each step asks here.
  void throw_if_write_failed() const {
    if (auto failure = driver.failure()) throw Error("cannot write " + context + ": " + failure->message());
  }

  // Runs one step of HDF5 calls; a refused write explains a failure better than what HDF5 says
  // about its consequences, so it is thrown first.
  template <typename Step>
  void guarded(Step step) {
    try {
      step();
    } catch (const Error&) {
      throw_if_write_failed();
      throw;
    }
    throw_if_write_failed();
  }

  // Writes a chunked tensor chunk by chunk, each already filtered as HDF5's fletcher32 filter
  // would (the chunk, whole at the edges, then its checksum), through H5Dwrite_chunk: one copy
  // into a reused buffer per chunk and a vectorized checksum, where H5Dwrite's filter pipeline
  // allocates and copies each chunk twice and sums it byte by byte. The files are the same.
  // chunk_shape_for's chunks are 1 in the dimensions before the one it cuts and whole after it,
  // so each chunk is one contiguous range of the row-major tensor.
  void write_chunks(hid_t dataset, const TensorRecord& record, std::span<const std::byte> bytes,
                    const std::string& where) {
    const std::vector<std::int64_t>& shape = record.shape;
    const std::size_t element = dtype_size(record.dtype);
    const std::vector<std::int64_t> chunk = chunk_shape_for(shape, element, options.max_chunk_bytes);
    // The dimension the chunks cut: the first whose chunk is not 1 (the last when all are 1).
    std::size_t cut = 0;
    while (cut + 1 < shape.size() && chunk[cut] == 1) ++cut;
    std::int64_t inner = 1;  // elements after the cut dimension
    for (std::size_t i = cut + 1; i < shape.size(); ++i) inner *= shape[i];
    std::int64_t outer = 1;  // chunks before the cut dimension (each of extent 1)
    for (std::size_t i = 0; i < cut; ++i) outer *= shape[i];
    const std::int64_t extent = shape[cut];
    const std::int64_t step = chunk[cut];
    const std::size_t chunk_bytes = static_cast<std::size_t>(step * inner) * element;
    chunk_buffer.resize(chunk_bytes + 4);
    std::vector<hsize_t> offset(shape.size(), 0);
    for (std::int64_t o = 0; o < outer; ++o) {
      std::int64_t rest = o;
      for (std::size_t i = cut; i-- > 0;) {
        offset[i] = static_cast<hsize_t>(rest % shape[i]);
        rest /= shape[i];
      }
      for (std::int64_t first = 0; first < extent; first += step) {
        const std::size_t valid = static_cast<std::size_t>(std::min(step, extent - first) * inner) * element;
        const std::size_t start = static_cast<std::size_t>((o * extent + first) * inner) * element;
        std::memcpy(chunk_buffer.data(), bytes.data() + start, valid);
        std::memset(chunk_buffer.data() + valid, 0, chunk_bytes - valid);  // an edge chunk is stored whole
        const std::uint32_t checksum = hdf5_fletcher32(std::span<const std::byte>(chunk_buffer.data(), chunk_bytes));
        for (int b = 0; b < 4; ++b) chunk_buffer[chunk_bytes + b] = static_cast<std::byte>(checksum >> (8 * b));
        offset[cut] = static_cast<hsize_t>(first);
        h5::check(H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset.data(), chunk_bytes + 4, chunk_buffer.data()),
                  "H5Dwrite_chunk", where);
      }
    }
  }

  // Creates the groups on the way to `name`, each remembering creation order.
  void make_parent_groups(const std::string& name) {
    for (auto slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
      std::string group = name.substr(0, slash);
      if (!groups.insert(group).second) continue;
      auto gcpl = h5::group_creation_properties(context);
      h5::Group created(h5::check_id(H5Gcreate2(file.get(), group.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                                     "H5Gcreate2", context + ", group '" + group + "'"));
    }
  }
};

namespace {

// Chunks are written directly where the stored bytes are the host's (the file types are
// little-endian) and there is a dimension to cut.
bool direct_chunks(const TensorRecord& record) {
  return std::endian::native == std::endian::little && !record.shape.empty() && record.element_count() > 0;
}

}  // namespace

std::vector<std::int64_t> chunk_shape_for(std::span<const std::int64_t> shape, std::size_t element_size,
                                          std::size_t max_chunk_bytes) {
  const std::int64_t budget = std::max<std::int64_t>(1, static_cast<std::int64_t>(max_chunk_bytes / element_size));
  std::vector<std::int64_t> chunk(shape.size(), 1);
  std::int64_t inner = 1;  // elements in one chunk so far, from the last dimension backwards
  for (std::size_t i = shape.size(); i-- > 0;) {
    const std::int64_t extent = std::max<std::int64_t>(shape[i], 1);
    if (inner * extent <= budget) {
      chunk[i] = extent;
      inner *= extent;
    } else {
      // HDF5 stores every chunk whole, the last one included: split this dimension into equal
      // parts rather than full-budget chunks and a mostly empty remainder.
      const std::int64_t most = std::max<std::int64_t>(1, budget / inner);
      const std::int64_t parts = (extent + most - 1) / most;
      chunk[i] = (extent + parts - 1) / parts;
      break;  // the dimensions before this one stay 1
    }
  }
  return chunk;
}

ShardWriter::ShardWriter(std::string path, const CheckpointMetadata& metadata, ShardWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  h5::silence_errors();
  impl_->path = std::move(path);
  impl_->context = "checkpoint file '" + impl_->path + "'";
  impl_->options = options;
  if (options.max_chunk_bytes == 0 || options.max_chunk_bytes > (std::size_t{1} << 31))
    throw Error("checkpoint chunk size must be between 1 byte and 2 GiB");
  // HDF5 creates files 0666; creating the file first with our mode, then truncating it through
  // HDF5, keeps the mode.
  create_checkpoint_file(impl_->path);
  auto& s = *impl_;
  s.guarded([&] {
    auto fcpl = h5::file_creation_properties(s.context);
    auto fapl = s.driver.file_access(s.context);
    s.file = h5::File(h5::check_id(H5Fcreate(s.path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), "H5Fcreate",
                                   "cannot create " + s.context));
    h5::write_metadata(s.file.get(), metadata, s.context);
  });
}

ShardWriter::~ShardWriter() = default;
ShardWriter::ShardWriter(ShardWriter&&) noexcept = default;
ShardWriter& ShardWriter::operator=(ShardWriter&&) noexcept = default;

const std::string& ShardWriter::path() const { return impl_->path; }

void ShardWriter::write(const TensorRecord& record, std::span<const std::byte> bytes) {
  h5::silence_errors();
  auto& s = *impl_;
  if (!s.file.valid()) throw Error("cannot write tensor '" + record.name + "': " + s.context + " is closed");
  validate_tensor_record(record);
  if (bytes.size() != record.byte_size())
    throw Error("tensor '" + record.name + "' of shape " + format_shape(record.shape) + " and dtype " +
                std::string(dtype_name(record.dtype)) + " needs " + std::to_string(record.byte_size()) +
                " bytes, got " + std::to_string(bytes.size()));
  if (!s.tensors.insert(record.name).second)
    throw Error("tensor '" + record.name + "' written twice to " + s.context);

  const std::string where = s.context + ", tensor '" + record.name + "'";
  s.guarded([&] {
    s.make_parent_groups(record.name);

    std::vector<hsize_t> dims(record.shape.begin(), record.shape.end());
    h5::Dataspace space(h5::check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                                     "H5Screate_simple", where));
    h5::PropertyList dcpl(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", where));
    // Every byte gets written right away, so prefilling with zeros would only cost time.
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time", where);
    // Checksums need chunked storage; an empty tensor has no data to guard (and HDF5 refuses
    // chunks larger than a zero-size fixed dimension), so it stays contiguous.
    if (record.element_count() > 0) {
      auto chunk = chunk_shape_for(record.shape, dtype_size(record.dtype), s.options.max_chunk_bytes);
      std::vector<hsize_t> chunk_dims(chunk.begin(), chunk.end());
      h5::check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk_dims.size()), chunk_dims.data()), "H5Pset_chunk", where);
      h5::check(H5Pset_fletcher32(dcpl.get()), "H5Pset_fletcher32", where);
    }
    h5::Dataset dataset(h5::check_id(H5Dcreate2(s.file.get(), record.name.c_str(), h5::file_type_of(record.dtype),
                                                space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                     "H5Dcreate2", where));
    if (!bytes.empty()) {
      if (direct_chunks(record))
        s.write_chunks(dataset.get(), record, bytes, where);
      else
        h5::check(H5Dwrite(dataset.get(), h5::memory_type_of(record.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()),
                  "H5Dwrite", where);
    }
    h5::write_tensor_attributes(dataset.get(), record, where);
  });
}

void ShardWriter::close() {
  h5::silence_errors();
  auto& s = *impl_;
  if (!s.file.valid()) return;
  // Closing writes what HDF5 still holds; a refused write shows only through the driver.
  const herr_t closed = s.file.close();
  s.throw_if_write_failed();
  h5::check(closed, "H5Fclose", "cannot finish " + s.context);
  // HDF5 writes with plain write(2); durability before the directory is published is ours.
  sync_file(s.path);
}

void write_shard(const std::string& path, const CheckpointMetadata& metadata, std::span<const TensorData> tensors,
                 ShardWriterOptions options) {
  ShardWriter writer(path, metadata, options);
  for (const auto& tensor : tensors) writer.write(tensor);
  writer.close();
}

}  // namespace mgt::ckpt
