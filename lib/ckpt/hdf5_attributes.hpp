// Internal to lib/ckpt (includes hdf5.h): typed attribute reads and writes. `context` names the
// file (and object) for error messages. Strings are fixed-length UTF-8, NUL-padded, which
// h5py and h5dump show as plain text.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::ckpt::h5 {

void write_string_attribute(hid_t object, const char* name, std::string_view value, const std::string& context);
void write_int64_attribute(hid_t object, const char* name, std::int64_t value, const std::string& context);
void write_double_attribute(hid_t object, const char* name, double value, const std::string& context);
void write_int64_array_attribute(hid_t object, const char* name, std::span<const std::int64_t> values,
                                 const std::string& context);

bool has_attribute(hid_t object, const char* name, const std::string& context);
// The readers throw mgt::Error naming the attribute when it is missing or of another kind.
std::string read_string_attribute(hid_t object, const char* name, const std::string& context);
std::int64_t read_int64_attribute(hid_t object, const char* name, const std::string& context);
double read_double_attribute(hid_t object, const char* name, const std::string& context);
std::vector<std::int64_t> read_int64_array_attribute(hid_t object, const char* name, const std::string& context);

// Names of all attributes of an object, in name order.
std::vector<std::string> attribute_names(hid_t object, const std::string& context);

}  // namespace mgt::ckpt::h5
