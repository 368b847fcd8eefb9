#include "ckpt/parameter_piece_record.hpp"

#include <utility>

namespace mgt::ckpt {

TensorRecord parameter_piece_record(std::string path, const ParameterEntry& e, const TensorParallelRank& tensor) {
  // An expert's weight split over its expert-tensor-parallel ranks records that split.
  const TensorParallelRank& tp = e.partition(tensor);
  if (e.partition_dim == kNotPartitioned || tp.size == 1)
    return TensorRecord::whole(std::move(path), TensorDType::Float32, e.global_shape);
  return TensorRecord::partitioned(std::move(path), TensorDType::Float32, e.local_shape,
                                   static_cast<int>(e.partition_dim), static_cast<int>(tp.rank),
                                   static_cast<int>(tp.size), static_cast<int>(e.partition_chunks));
}

TensorRecord parameter_range_record(std::string path, const ParameterEntry& e, const TensorParallelRank& tp,
                                    std::int64_t offset, std::int64_t length) {
  TensorRecord r = parameter_piece_record(std::move(path), e, tp);
  r.shape = {length};
  r.flat_range = FlatRange{offset, length};
  return r;
}

}  // namespace mgt::ckpt
