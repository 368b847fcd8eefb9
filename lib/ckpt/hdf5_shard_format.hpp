// Internal to lib/ckpt (includes hdf5.h): how metadata and tensor records are laid out as
// HDF5 attributes. A shard file looks like
//   /meta            attributes: format, format_version, iteration, consumed_*_samples,
//                    num_floating_point_operations_so_far, args, tokenizer, opt_param_scheduler
//                    (JSON text), tensor/pipeline/data parallel sizes and ranks
//   /meta/extra      one JSON text attribute per CheckpointMetadata::extra_json entry
//   /model/<param>, /optimizer/<state>/<param>, /rng/<name>, ...   tensors, each with attributes
//                    dtype, global_shape, partition_dim, partition_rank, partition_count
//                    [, partition_chunks (absent: 1)] [, flat_offset, flat_length (of the piece)]
// (man/man5/mgt-checkpoint.5 describes it for users.)
#pragma once
#include <hdf5.h>

#include <string>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt::h5 {

inline constexpr const char* kFormatName = "mgt-checkpoint";

void write_metadata(hid_t file, const CheckpointMetadata& metadata, const std::string& context);
// Refuses files not written by mgt and newer format versions.
CheckpointMetadata read_metadata(hid_t file, const std::string& context);

void write_tensor_attributes(hid_t dataset, const TensorRecord& record, const std::string& context);
// Rebuilds the record of a stored tensor from its attributes and dataspace.
TensorRecord read_tensor_record(hid_t dataset, const std::string& name, const std::string& context);

}  // namespace mgt::ckpt::h5
