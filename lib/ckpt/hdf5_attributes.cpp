#include "ckpt/hdf5_attributes.hpp"

#include <algorithm>

#include "ckpt/hdf5_error.hpp"
#include "ckpt/hdf5_handle.hpp"
#include "core/error.hpp"

namespace mgt::ckpt::h5 {
namespace {

std::string about(const std::string& context, const char* name) {
  return context + ", attribute '" + name + "'";
}

void write_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type, hid_t space,
                     const void* data, const std::string& context) {
  const auto where = about(context, name);
  // Overwrite semantics: a writer may set the same attribute twice.
  htri_t exists = H5Aexists(object, name);
  check(exists, "H5Aexists", where);
  if (exists > 0) check(H5Adelete(object, name), "H5Adelete", where);
  Attribute attribute(check_id(H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT),
                               "H5Acreate2", where));
  check(H5Awrite(attribute.get(), memory_type, data), "H5Awrite", where);
}

Attribute open_attribute(hid_t object, const char* name, const std::string& context) {
  const auto where = about(context, name);
  htri_t exists = H5Aexists(object, name);
  check(exists, "H5Aexists", where);
  if (exists == 0) throw Error(context + ": missing attribute '" + name + "'");
  return Attribute(check_id(H5Aopen(object, name, H5P_DEFAULT), "H5Aopen", where));
}

// Number of elements of an attribute's dataspace (1 for a scalar).
hssize_t element_count(hid_t attribute, const std::string& where) {
  Dataspace space(check_id(H5Aget_space(attribute), "H5Aget_space", where));
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) throw_error(where, "H5Sget_simple_extent_npoints");
  return n;
}

template <typename T>
T read_number(hid_t object, const char* name, hid_t memory_type, H5T_class_t expected_class,
              const std::string& context) {
  const auto where = about(context, name);
  Attribute attribute = open_attribute(object, name, context);
  Datatype type(check_id(H5Aget_type(attribute.get()), "H5Aget_type", where));
  H5T_class_t cls = H5Tget_class(type.get());
  if (cls != expected_class && !(expected_class == H5T_FLOAT && cls == H5T_INTEGER))
    throw Error(where + " is not a number of the expected kind");
  if (element_count(attribute.get(), where) != 1) throw Error(where + " is not a single value");
  T value{};
  check(H5Aread(attribute.get(), memory_type, &value), "H5Aread", where);
  return value;
}

// An HDF5 callback: nothing may propagate out of it.
herr_t collect_name(hid_t /*location*/, const char* name, const H5A_info_t* /*info*/, void* data) noexcept {
  try {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // namespace

void write_string_attribute(hid_t object, const char* name, std::string_view value, const std::string& context) {
  const auto where = about(context, name);
  Datatype type(check_id(H5Tcopy(H5T_C_S1), "H5Tcopy", where));
  // HDF5 strings cannot have size 0; an empty value is stored as one NUL.
  std::string padded(value);
  if (padded.empty()) padded.push_back('\0');
  check(H5Tset_size(type.get(), padded.size()), "H5Tset_size", where);
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "H5Tset_strpad", where);
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset", where);
  Dataspace space(check_id(H5Screate(H5S_SCALAR), "H5Screate", where));
  write_attribute(object, name, type.get(), type.get(), space.get(), padded.data(), context);
}

void write_int64_attribute(hid_t object, const char* name, std::int64_t value, const std::string& context) {
  Dataspace space(check_id(H5Screate(H5S_SCALAR), "H5Screate", about(context, name)));
  write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), &value, context);
}

void write_double_attribute(hid_t object, const char* name, double value, const std::string& context) {
  Dataspace space(check_id(H5Screate(H5S_SCALAR), "H5Screate", about(context, name)));
  write_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(), &value, context);
}

void write_int64_array_attribute(hid_t object, const char* name, std::span<const std::int64_t> values,
                                 const std::string& context) {
  const auto where = about(context, name);
  // An empty array (a 0-d global shape) is a null dataspace: HDF5 refuses 1-D extent 0 here.
  hsize_t n = values.size();
  Dataspace space(values.empty() ? check_id(H5Screate(H5S_NULL), "H5Screate", where)
                                 : check_id(H5Screate_simple(1, &n, nullptr), "H5Screate_simple", where));
  const std::int64_t unused = 0;  // H5Awrite wants a buffer even when there is nothing to write
  write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(),
                  values.empty() ? &unused : values.data(), context);
}

bool has_attribute(hid_t object, const char* name, const std::string& context) {
  htri_t exists = H5Aexists(object, name);
  check(exists, "H5Aexists", about(context, name));
  return exists > 0;
}

std::string read_string_attribute(hid_t object, const char* name, const std::string& context) {
  const auto where = about(context, name);
  Attribute attribute = open_attribute(object, name, context);
  Datatype type(check_id(H5Aget_type(attribute.get()), "H5Aget_type", where));
  if (H5Tget_class(type.get()) != H5T_STRING) throw Error(where + " is not a string");
  htri_t variable = H5Tis_variable_str(type.get());
  check(variable, "H5Tis_variable_str", where);
  if (variable > 0) throw Error(where + " is a variable-length string, which mgt does not write or read");
  if (element_count(attribute.get(), where) != 1) throw Error(where + " is not a single string");
  std::size_t size = H5Tget_size(type.get());
  if (size == 0) throw_error(where, "H5Tget_size");
  std::string value(size, '\0');
  check(H5Aread(attribute.get(), type.get(), value.data()), "H5Aread", where);
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

std::int64_t read_int64_attribute(hid_t object, const char* name, const std::string& context) {
  return read_number<std::int64_t>(object, name, H5T_NATIVE_INT64, H5T_INTEGER, context);
}

double read_double_attribute(hid_t object, const char* name, const std::string& context) {
  return read_number<double>(object, name, H5T_NATIVE_DOUBLE, H5T_FLOAT, context);
}

std::vector<std::int64_t> read_int64_array_attribute(hid_t object, const char* name, const std::string& context) {
  const auto where = about(context, name);
  Attribute attribute = open_attribute(object, name, context);
  Datatype type(check_id(H5Aget_type(attribute.get()), "H5Aget_type", where));
  if (H5Tget_class(type.get()) != H5T_INTEGER) throw Error(where + " is not an integer array");
  Dataspace space(check_id(H5Aget_space(attribute.get()), "H5Aget_space", where));
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return {};
  if (H5Sget_simple_extent_ndims(space.get()) > 1) throw Error(where + " is not a 1-D array");
  std::vector<std::int64_t> values(static_cast<std::size_t>(element_count(attribute.get(), where)));
  check(H5Aread(attribute.get(), H5T_NATIVE_INT64, values.data()), "H5Aread", where);
  return values;
}

std::vector<std::string> attribute_names(hid_t object, const std::string& context) {
  std::vector<std::string> names;
  hsize_t index = 0;
  // In native order, sorted here: any other order has HDF5 1.10 build a table of the attributes
  // first, whose clean-up after a read error (a damaged heap block) is not to be relied on (see
  // the link names in checkpoint_reader.cpp).
  check(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, &index, collect_name, &names), "H5Aiterate2", context);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace mgt::ckpt::h5
