// Python values as json.dumps(value, indent=4) prints them. Megatron names its cache files
// after the MD5 of such a text, so the text must match Python's to the byte: key order as
// inserted, ": " and "," separators, four-space indentation, "[]" and "{}" when empty, floats
// as repr() prints them and non-ASCII escaped. Unlike json.dumps, NaN and infinities are written
// as null: the text is always strict JSON.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mgt {

class PyValue {
public:
  using List = std::vector<PyValue>;
  using Dict = std::vector<std::pair<std::string, PyValue>>;  // insertion-ordered

  PyValue() = default;  // None
  static PyValue none() { return PyValue(); }
  static PyValue boolean(bool b) { return PyValue(Storage(b)); }
  static PyValue integer(std::int64_t v) { return PyValue(Storage(v)); }
  static PyValue real(double v) { return PyValue(Storage(v)); }
  static PyValue string(std::string s) { return PyValue(Storage(std::move(s))); }
  static PyValue list(List items = {}) { return PyValue(Storage(std::move(items))); }
  static PyValue dict(Dict items = {}) { return PyValue(Storage(std::move(items))); }
  // An optional string: None when absent.
  static PyValue string_or_none(const std::optional<std::string>& s) {
    return s ? string(*s) : none();
  }

  // Appends a key to a dict value (throws on other kinds).
  PyValue& set(std::string key, PyValue value);
  // Appends an item to a list value (throws on other kinds).
  PyValue& append(PyValue value);

  // json.dumps(self, indent=4)
  std::string dumps() const;

private:
  using Storage = std::variant<std::monostate, bool, std::int64_t, double, std::string, List, Dict>;
  explicit PyValue(Storage s) : value_(std::move(s)) {}
  void write(std::string& out, int level) const;
  Storage value_;
};

}  // namespace mgt
