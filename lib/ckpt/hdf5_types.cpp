#include "ckpt/hdf5_types.hpp"

#include "ckpt/hdf5_error.hpp"
#include "core/error.hpp"

namespace mgt::ckpt::h5 {

hid_t file_type_of(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::Float32: return H5T_IEEE_F32LE;
    case TensorDType::Float64: return H5T_IEEE_F64LE;
    case TensorDType::BFloat16:
    case TensorDType::Float16:
    case TensorDType::UInt16: return H5T_STD_U16LE;
    case TensorDType::Int64: return H5T_STD_I64LE;
    case TensorDType::Int32: return H5T_STD_I32LE;
    case TensorDType::Int16: return H5T_STD_I16LE;
    case TensorDType::Int8: return H5T_STD_I8LE;
    case TensorDType::UInt64: return H5T_STD_U64LE;
    case TensorDType::UInt32: return H5T_STD_U32LE;
    case TensorDType::UInt8: return H5T_STD_U8LE;
  }
  throw Error("unknown tensor dtype");
}

hid_t memory_type_of(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::Float32: return H5T_NATIVE_FLOAT;
    case TensorDType::Float64: return H5T_NATIVE_DOUBLE;
    case TensorDType::BFloat16:
    case TensorDType::Float16:
    case TensorDType::UInt16: return H5T_NATIVE_UINT16;
    case TensorDType::Int64: return H5T_NATIVE_INT64;
    case TensorDType::Int32: return H5T_NATIVE_INT32;
    case TensorDType::Int16: return H5T_NATIVE_INT16;
    case TensorDType::Int8: return H5T_NATIVE_INT8;
    case TensorDType::UInt64: return H5T_NATIVE_UINT64;
    case TensorDType::UInt32: return H5T_NATIVE_UINT32;
    case TensorDType::UInt8: return H5T_NATIVE_UINT8;
  }
  throw Error("unknown tensor dtype");
}

bool stored_type_matches(hid_t stored_type, TensorDType dtype) {
  // Same class, size and sign: reading then only swaps bytes if the host is big-endian.
  hid_t expected = file_type_of(dtype);
  if (H5Tget_class(stored_type) != H5Tget_class(expected)) return false;
  if (H5Tget_size(stored_type) != H5Tget_size(expected)) return false;
  if (H5Tget_class(expected) == H5T_INTEGER && H5Tget_sign(stored_type) != H5Tget_sign(expected)) return false;
  return true;
}

PropertyList file_access_properties(const std::string& context) {
  PropertyList fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", context));
  check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110), "H5Pset_libver_bounds", context);
  // Lock where supported, but work on file systems without flock (some Lustre mounts).
  check(H5Pset_file_locking(fapl.get(), true, true), "H5Pset_file_locking", context);
  check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_SEMI), "H5Pset_fclose_degree", context);
  return fapl;
}

PropertyList file_creation_properties(const std::string& context) {
  PropertyList fcpl(check_id(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate", context));
  check(H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        "H5Pset_link_creation_order", context);
  return fcpl;
}

PropertyList group_creation_properties(const std::string& context) {
  PropertyList gcpl(check_id(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate", context));
  check(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        "H5Pset_link_creation_order", context);
  return gcpl;
}

}  // namespace mgt::ckpt::h5
