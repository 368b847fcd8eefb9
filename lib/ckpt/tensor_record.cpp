#include "ckpt/tensor_record.hpp"

#include <array>
#include <utility>

#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {
namespace {

struct DTypeInfo {
  TensorDType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 12> kDTypes{{
    {TensorDType::Float32, "float32", 4}, {TensorDType::Float64, "float64", 8},
    {TensorDType::BFloat16, "bfloat16", 2}, {TensorDType::Float16, "float16", 2},
    {TensorDType::Int64, "int64", 8},     {TensorDType::Int32, "int32", 4},
    {TensorDType::Int16, "int16", 2},     {TensorDType::Int8, "int8", 1},
    {TensorDType::UInt64, "uint64", 8},   {TensorDType::UInt32, "uint32", 4},
    {TensorDType::UInt16, "uint16", 2},   {TensorDType::UInt8, "uint8", 1},
}};

const DTypeInfo& info_of(TensorDType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info;
  throw Error("unknown tensor dtype code " + std::to_string(static_cast<int>(dtype)));
}

[[noreturn]] void invalid(const TensorRecord& record, const std::string& why) {
  throw Error("invalid checkpoint tensor '" + record.name + "': " + why);
}

}  // namespace

std::size_t dtype_size(TensorDType dtype) { return info_of(dtype).size; }

std::string_view dtype_name(TensorDType dtype) { return info_of(dtype).name; }

std::optional<TensorDType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

std::int64_t TensorRecord::element_count() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

TensorRecord TensorRecord::whole(std::string name, TensorDType dtype, std::vector<std::int64_t> shape) {
  TensorRecord r;
  r.name = std::move(name);
  r.dtype = dtype;
  r.global_shape = shape;
  r.shape = std::move(shape);
  return r;
}

TensorRecord TensorRecord::partitioned(std::string name, TensorDType dtype,
                                       std::vector<std::int64_t> local_shape, int dim, int rank,
                                       int count, int chunks) {
  TensorRecord r;
  r.name = std::move(name);
  r.dtype = dtype;
  r.global_shape = local_shape;
  if (dim >= 0 && static_cast<std::size_t>(dim) < local_shape.size()) r.global_shape[dim] *= count;
  r.shape = std::move(local_shape);
  r.partition = {dim, rank, count, chunks};
  return r;
}

TensorRecord TensorRecord::flat_slice(std::string name, TensorDType dtype,
                                      std::vector<std::int64_t> global_shape, std::int64_t offset,
                                      std::int64_t length) {
  TensorRecord r;
  r.name = std::move(name);
  r.dtype = dtype;
  r.shape = {length};
  r.global_shape = std::move(global_shape);
  r.flat_range = FlatRange{offset, length};
  return r;
}

std::vector<std::int64_t> partition_piece_shape(const TensorRecord& record) {
  std::vector<std::int64_t> shape = record.global_shape;
  const auto& p = record.partition;
  if (p.dim >= 0 && static_cast<std::size_t>(p.dim) < shape.size() && p.count > 0) shape[p.dim] /= p.count;
  return shape;
}

void validate_tensor_record(const TensorRecord& record) {
  validate_tensor_path(record.name);
  info_of(record.dtype);
  if (record.shape.empty()) invalid(record, "a stored tensor needs at least one dimension (use [1] for a scalar)");
  for (auto d : record.shape)
    if (d < 0) invalid(record, "negative size in shape " + format_shape(record.shape));
  for (auto d : record.global_shape)
    if (d < 0) invalid(record, "negative size in global shape " + format_shape(record.global_shape));

  const auto& p = record.partition;
  if (p.count < 1 || p.rank < 0 || p.rank >= p.count)
    invalid(record, "partition rank " + std::to_string(p.rank) + " of " + std::to_string(p.count));
  if (p.chunks < 1) invalid(record, "partition chunks " + std::to_string(p.chunks));
  if (p.dim >= 0) {
    if (static_cast<std::size_t>(p.dim) >= record.global_shape.size())
      invalid(record, "partition dimension " + std::to_string(p.dim) + " outside global shape " +
                          format_shape(record.global_shape));
    if (record.global_shape[p.dim] % (std::int64_t{p.count} * p.chunks) != 0)
      invalid(record, "dimension " + std::to_string(p.dim) + " of global shape " + format_shape(record.global_shape) +
                          " does not split into " + std::to_string(p.chunks) + " x " + std::to_string(p.count) +
                          " equal pieces");
  }

  if (record.flat_range) {
    std::int64_t global_elements = 1;
    for (auto d : partition_piece_shape(record)) global_elements *= d;
    const auto& f = *record.flat_range;
    if (record.shape.size() != 1 || record.shape[0] != f.length)
      invalid(record, "a flat range of length " + std::to_string(f.length) +
                          " must be stored as a 1-D tensor of that length, not " + format_shape(record.shape));
    if (f.offset < 0 || f.length < 0 || f.offset + f.length > global_elements)
      invalid(record, "flat range [" + std::to_string(f.offset) + ", " + std::to_string(f.offset + f.length) +
                          ") lies outside the " + std::to_string(global_elements) + " elements of piece shape " +
                          format_shape(partition_piece_shape(record)));
    return;
  }

  if (p.dim == -1) {
    if (record.shape != record.global_shape)
      invalid(record, "shape " + format_shape(record.shape) + " differs from global shape " +
                          format_shape(record.global_shape) + " but the tensor is not partitioned");
    return;
  }
  if (p.dim < 0 || static_cast<std::size_t>(p.dim) >= record.shape.size())
    invalid(record, "partition dimension " + std::to_string(p.dim) + " outside shape " + format_shape(record.shape));
  bool consistent = record.shape.size() == record.global_shape.size();
  for (std::size_t i = 0; consistent && i < record.shape.size(); ++i) {
    if (static_cast<int>(i) == p.dim)
      consistent = record.shape[i] <= record.global_shape[i];
    else
      consistent = record.shape[i] == record.global_shape[i];
  }
  if (!consistent)
    invalid(record, "shape " + format_shape(record.shape) + " cannot be a piece along dimension " +
                        std::to_string(p.dim) + " of global shape " + format_shape(record.global_shape));
}

std::string format_shape(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace mgt::ckpt
