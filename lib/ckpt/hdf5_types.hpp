// Internal to lib/ckpt (includes hdf5.h): how tensor element types and files are set up in
// HDF5, shared by the shard writer and reader so both sides agree.
#pragma once
#include <hdf5.h>

#include <string>

#include "ckpt/hdf5_handle.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt::h5 {

// Little-endian on disk whatever the host; 16-bit floats as raw unsigned words.
hid_t file_type_of(TensorDType dtype);
hid_t memory_type_of(TensorDType dtype);
// True when a stored dataset's type can hold `dtype` without conversion.
bool stored_type_matches(hid_t stored_type, TensorDType dtype);

// File access: the 1.10 file format (checksummed superblock, object headers and chunk indices),
// file locking where the file system has it, and no silent deferral of close with open objects.
PropertyList file_access_properties(const std::string& context);
// File/group creation: remember link creation order, so tensors list in the order written.
PropertyList file_creation_properties(const std::string& context);
PropertyList group_creation_properties(const std::string& context);

}  // namespace mgt::ckpt::h5
