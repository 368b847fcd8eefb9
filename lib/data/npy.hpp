// NumPy .npy files, byte-identical to numpy.save for the integer arrays Megatron caches
// (format 1.0, header padded to 64 bytes with room for the first axis to grow), and read back
// with full validation: a cached index is untrusted input.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace mgt {

static_assert(std::endian::native == std::endian::little,
              ".npy arrays are stored little-endian and mapped as they are");

enum class NpyDType { Int16, Int32, UInt32, Int64 };

std::size_t npy_itemsize(NpyDType dtype);
std::string npy_descr(NpyDType dtype);  // "<i4", ...
std::string npy_dtype_name(NpyDType dtype);  // "int32", ...

template <typename T>
constexpr NpyDType npy_dtype_of() {
  if constexpr (std::is_same_v<T, std::int16_t>) return NpyDType::Int16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return NpyDType::Int32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return NpyDType::UInt32;
  else {
    static_assert(std::is_same_v<T, std::int64_t>, "unsupported .npy element type");
    return NpyDType::Int64;
  }
}

// A C-ordered integer array, either built in memory or mapped from a .npy file. Copies share
// the same immutable storage.
class NpyArray {
public:
  NpyArray() = default;

  template <typename T>
  static NpyArray from_vector(std::vector<T> values, std::vector<std::size_t> shape) {
    auto storage = std::make_shared<const std::vector<T>>(std::move(values));
    NpyArray a;
    a.dtype_ = npy_dtype_of<T>();
    a.shape_ = std::move(shape);
    a.data_ = reinterpret_cast<const std::uint8_t*>(storage->data());
    a.owner_ = storage;
    a.check_shape_matches(storage->size());
    return a;
  }

  NpyDType dtype() const { return dtype_; }
  const std::vector<std::size_t>& shape() const { return shape_; }
  std::size_t size() const;  // number of elements
  std::span<const std::uint8_t> bytes() const { return {data_, size() * npy_itemsize(dtype_)}; }

  // Typed view; throws mgt::Error when T is not the stored type.
  template <typename T>
  std::span<const T> values() const {
    check_dtype(npy_dtype_of<T>());
    return {reinterpret_cast<const T*>(data_), size()};
  }
  // Element i of the flattened array, whatever its integer type.
  std::int64_t get(std::size_t i) const;

private:
  friend NpyArray load_npy(const std::string& path);
  void check_dtype(NpyDType wanted) const;
  void check_shape_matches(std::size_t elements) const;
  NpyDType dtype_ = NpyDType::Int64;
  std::vector<std::size_t> shape_{0};
  const std::uint8_t* data_ = nullptr;
  std::shared_ptr<const void> owner_;
};

// The header numpy.save writes for a C-ordered array (magic, version, length, dict, padding).
std::string npy_header(NpyDType dtype, const std::vector<std::size_t>& shape);

// Writes atomically (temporary name, fsync, rename).
void write_npy(const std::string& path, const NpyArray& array);

// Reads and validates magic, version, header dict, dtype and size; throws mgt::Error naming
// the file. The data stays memory-mapped.
NpyArray load_npy(const std::string& path);

// load_npy plus expectations on dtype and rank (and the second axis when `columns` > 0).
NpyArray load_npy(const std::string& path, std::initializer_list<NpyDType> allowed,
                  std::size_t rank, std::size_t columns = 0);

}  // namespace mgt
