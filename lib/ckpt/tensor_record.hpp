// What a checkpoint knows about one stored tensor besides its bytes: element type, the shape of
// the piece in this shard, the shape of the whole tensor, and how the piece was cut from it. The
// partitioning facts are what let a converter reshard a checkpoint (TP 2 -> 4, distributed
// optimizer ranges) without knowing the model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::ckpt {

// Element types as stored. bfloat16 and float16 are kept as raw 16-bit words (HDF5 has no
// bfloat16); the dataset's "dtype" attribute says which one it is.
enum class TensorDType : std::uint8_t {
  Float32, Float64, BFloat16, Float16, Int64, Int32, Int16, Int8, UInt64, UInt32, UInt16, UInt8,
};

std::size_t dtype_size(TensorDType dtype);
std::string_view dtype_name(TensorDType dtype);  // "float32", "bfloat16", "uint8", ...
std::optional<TensorDType> dtype_from_name(std::string_view name);

// A tensor cut into `count` equal pieces along `dim` (Megatron's tensor-parallel split); dim -1
// means the tensor is whole in every shard that holds it. `chunks` > 1: the dimension is that
// many equal blocks, each split over the ranks on its own, and a piece is its rank's slice of
// every block in turn (SwiGLU's linear_fc1, whose shard is [gate_rank ; up_rank]; Megatron's
// tools/checkpoint/loader_base.py splits each shard in halves before merging for this reason).
struct TensorPartition {
  int dim = -1;
  int rank = 0;
  int count = 1;
  int chunks = 1;
  bool operator==(const TensorPartition&) const = default;
};

// For the distributed optimizer: this shard holds elements [offset, offset + length) of the
// row-major flattened piece (the whole global tensor when it is not partitioned, else the
// piece `partition` names), stored as a 1-D dataset.
struct FlatRange {
  std::int64_t offset = 0;
  std::int64_t length = 0;
  bool operator==(const FlatRange&) const = default;
};

struct TensorRecord {
  std::string name;                        // path inside the shard file, e.g. "model/decoder.final_layernorm.weight"
  TensorDType dtype = TensorDType::Float32;
  std::vector<std::int64_t> shape;         // of the piece stored in this shard
  std::vector<std::int64_t> global_shape;  // of the whole tensor
  TensorPartition partition;
  std::optional<FlatRange> flat_range;

  bool operator==(const TensorRecord&) const = default;

  std::int64_t element_count() const;  // of the stored piece
  std::size_t byte_size() const { return static_cast<std::size_t>(element_count()) * dtype_size(dtype); }

  // A tensor stored whole.
  static TensorRecord whole(std::string name, TensorDType dtype, std::vector<std::int64_t> shape);
  // One of `count` equal pieces along `dim`; the global shape is the local one times count there.
  static TensorRecord partitioned(std::string name, TensorDType dtype,
                                  std::vector<std::int64_t> local_shape, int dim, int rank, int count,
                                  int chunks = 1);
  // Elements [offset, offset + length) of the flattened global tensor.
  static TensorRecord flat_slice(std::string name, TensorDType dtype,
                                 std::vector<std::int64_t> global_shape, std::int64_t offset,
                                 std::int64_t length);
};

// The shape of the piece `partition` names: the global shape with the partitioned dimension
// divided by the count (the global shape itself when not partitioned).
std::vector<std::int64_t> partition_piece_shape(const TensorRecord& record);

// Throws mgt::Error when the record contradicts itself (bad name, negative sizes, a local shape
// that cannot come from the global shape by the stated partitioning).
void validate_tensor_record(const TensorRecord& record);

// "[a, b, c]"
std::string format_shape(std::span<const std::int64_t> shape);

}  // namespace mgt::ckpt
