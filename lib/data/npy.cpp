#include "data/npy.hpp"

#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/mapped_file.hpp"

namespace mgt {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
constexpr std::size_t kAlign = 64;
// numpy leaves room for the first axis to grow to this many digits without moving the data.
constexpr std::size_t kGrowthAxisDigits = 21;

std::string shape_repr(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::optional<NpyDType> dtype_from_descr(std::string_view d) {
  if (d == "<i2") return NpyDType::Int16;
  if (d == "<i4") return NpyDType::Int32;
  if (d == "<u4") return NpyDType::UInt32;
  if (d == "<i8") return NpyDType::Int64;
  return std::nullopt;
}

// The header dict is a Python literal; numpy writes a fixed form, but anything numpy itself
// would accept from another writer is read: quoted keys in any order, spacing, trailing comma.
class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  void parse(std::string& descr, std::optional<bool>& fortran, std::optional<std::vector<std::size_t>>& shape) {
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') { ++pos_; break; }
      std::string key = parse_string();
      expect(':');
      if (key == "descr") descr = parse_string();
      else if (key == "fortran_order") fortran = parse_bool();
      else if (key == "shape") shape = parse_tuple();
      else fail("unexpected key '" + key + "' in header");
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect('}');
      break;
    }
    skip_space();
    if (pos_ != s_.size()) fail("trailing characters after the header dict");
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path_ + ": malformed .npy header: " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    auto end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool parse_bool() {
    skip_space();
    if (s_.substr(pos_, 4) == "True") { pos_ += 4; return true; }
    if (s_.substr(pos_, 5) == "False") { pos_ += 5; return false; }
    fail("expected True or False");
  }
  std::vector<std::size_t> parse_tuple() {
    expect('(');
    std::vector<std::size_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') { ++pos_; break; }
      if (peek() < '0' || peek() > '9') fail("expected a dimension");
      std::size_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        std::size_t digit = static_cast<std::size_t>(peek() - '0');
        if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10) fail("dimension too large");
        v = v * 10 + digit;
        ++pos_;
      }
      dims.push_back(v);
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect(')');
      break;
    }
    return dims;
  }
  std::string_view s_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

std::size_t checked_elements(const std::vector<std::size_t>& shape, const std::string& path) {
  std::size_t n = 1;
  for (auto d : shape) {
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / 8 / d)
      throw Error(path + ": .npy shape " + shape_repr(shape) + " is too large");
    n *= d;
  }
  return n;
}

}  // namespace

std::size_t npy_itemsize(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::Int16: return 2;
    case NpyDType::Int32: return 4;
    case NpyDType::UInt32: return 4;
    case NpyDType::Int64: return 8;
  }
  return 0;
}

std::string npy_descr(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::Int16: return "<i2";
    case NpyDType::Int32: return "<i4";
    case NpyDType::UInt32: return "<u4";
    case NpyDType::Int64: return "<i8";
  }
  return "";
}

std::string npy_dtype_name(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::Int16: return "int16";
    case NpyDType::Int32: return "int32";
    case NpyDType::UInt32: return "uint32";
    case NpyDType::Int64: return "int64";
  }
  return "";
}

std::size_t NpyArray::size() const {
  std::size_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

std::int64_t NpyArray::get(std::size_t i) const {
  const std::uint8_t* p = data_ + i * npy_itemsize(dtype_);
  switch (dtype_) {
    case NpyDType::Int16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
    case NpyDType::Int32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case NpyDType::UInt32: { std::uint32_t v; std::memcpy(&v, p, 4); return v; }
    case NpyDType::Int64: { std::int64_t v; std::memcpy(&v, p, 8); return v; }
  }
  return 0;
}

void NpyArray::check_dtype(NpyDType wanted) const {
  if (dtype_ != wanted)
    throw Error("array of " + npy_dtype_name(dtype_) + " read as " + npy_dtype_name(wanted));
}

void NpyArray::check_shape_matches(std::size_t elements) const {
  if (size() != elements)
    throw Error("internal error: shape " + shape_repr(shape_) + " does not match " +
                std::to_string(elements) + " elements");
}

std::string npy_header(NpyDType dtype, const std::vector<std::size_t>& shape) {
  std::string dict = "{'descr': '" + npy_descr(dtype) + "', 'fortran_order': False, 'shape': " +
                     shape_repr(shape) + ", }";
  if (!shape.empty()) {
    std::size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisDigits) dict.append(kGrowthAxisDigits - digits, ' ');
  }
  // magic + version (2) + uint16 length (2) + dict + '\n', padded with spaces to 64 bytes.
  std::size_t hlen = dict.size() + 1;
  std::size_t padlen = kAlign - ((kMagicSize + 2 + 2 + hlen) % kAlign);
  std::size_t total = hlen + padlen;
  if (total > 0xffff) throw Error("internal error: .npy header too long");
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(total & 0xff);
  out += static_cast<char>(total >> 8);
  out += dict;
  out.append(padlen, ' ');
  out += '\n';
  return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
  AtomicFile file(path);
  file.write(npy_header(array.dtype(), array.shape()));
  auto bytes = array.bytes();
  if (!bytes.empty()) file.write(bytes.data(), bytes.size());
  file.commit();
}

NpyArray load_npy(const std::string& path) {
  auto mapped = std::make_shared<MappedFile>(path);
  std::string_view v = mapped->view();
  if (v.size() < kMagicSize + 4 || v.substr(0, kMagicSize) != std::string_view(kMagic, kMagicSize))
    throw Error(path + ": not a .npy file (bad magic)");
  auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(v[i])); };
  std::size_t major = byte(6), minor = byte(7);
  std::size_t header_start, header_len;
  if (major == 1 && minor == 0) {
    header_start = 10;
    header_len = byte(8) | (byte(9) << 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (v.size() < 12) throw Error(path + ": truncated .npy header");
    header_start = 12;
    header_len = byte(8) | (byte(9) << 8) | (byte(10) << 16) | (byte(11) << 24);
  } else {
    throw Error(path + ": unsupported .npy format version " + std::to_string(major) + "." +
                std::to_string(minor));
  }
  if (header_start + header_len > v.size()) throw Error(path + ": truncated .npy header");
  std::string descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::size_t>> shape;
  HeaderParser(v.substr(header_start, header_len), path).parse(descr, fortran, shape);
  if (descr.empty() || !fortran || !shape)
    throw Error(path + ": malformed .npy header: 'descr', 'fortran_order' and 'shape' are required");
  auto dtype = dtype_from_descr(descr);
  if (!dtype) throw Error(path + ": unsupported .npy dtype '" + descr + "'");
  if (*fortran && shape->size() > 1) throw Error(path + ": Fortran-ordered .npy arrays are not supported");

  std::size_t data_offset = header_start + header_len;
  std::size_t elements = checked_elements(*shape, path);
  std::size_t expected = elements * npy_itemsize(*dtype);
  std::size_t actual = v.size() - data_offset;
  if (actual != expected)
    throw Error(path + ": " + std::to_string(actual) + " bytes of data, but shape " +
                shape_repr(*shape) + " of " + npy_dtype_name(*dtype) + " needs " +
                std::to_string(expected) + (actual < expected ? " (truncated)" : ""));

  NpyArray a;
  a.dtype_ = *dtype;
  a.shape_ = *shape;
  const std::uint8_t* data = mapped->data() + data_offset;
  if (reinterpret_cast<std::uintptr_t>(data) % npy_itemsize(*dtype) == 0 || expected == 0) {
    a.data_ = data;
    a.owner_ = mapped;
  } else {
    // A header length numpy would not write leaves the data unaligned: keep an aligned copy.
    auto copy = std::make_shared<std::vector<std::int64_t>>((expected + 7) / 8);
    std::memcpy(copy->data(), data, expected);
    a.data_ = reinterpret_cast<const std::uint8_t*>(copy->data());
    a.owner_ = copy;
  }
  return a;
}

NpyArray load_npy(const std::string& path, std::initializer_list<NpyDType> allowed,
                  std::size_t rank, std::size_t columns) {
  NpyArray a = load_npy(path);
  bool ok = false;
  std::string names;
  for (auto d : allowed) {
    ok = ok || d == a.dtype();
    names += (names.empty() ? "" : " or ") + npy_dtype_name(d);
  }
  if (!ok)
    throw Error(path + ": dtype " + npy_dtype_name(a.dtype()) + ", expected " + names);
  if (a.shape().size() != rank || (columns > 0 && a.shape()[1] != columns))
    throw Error(path + ": shape " + shape_repr(a.shape()) + ", expected a " + std::to_string(rank) +
                "-D array" + (columns > 0 ? " with " + std::to_string(columns) + " columns" : ""));
  return a;
}

}  // namespace mgt
