#include "core/json_scalars.hpp"

#include <simdjson.h>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/json_wide_integers.hpp"

namespace mgt {

JsonScalars::JsonScalars(const std::string& text, const std::string& what) : what_(what) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  // An integer wider than 64 bits (transformers' int(1e30) for "no limit") reads as a double.
  if (auto error = parser.parse(json_with_wide_integers_as_reals(text)).get(root); error)
    throw Error(what + " is not valid JSON (" + simdjson::error_message(error) + ")");
  simdjson::dom::object object;
  if (root.get(object)) throw Error(what + " is not a JSON object");
  for (auto field : object) {
    const std::string key(field.key);
    const simdjson::dom::element v = field.value;
    switch (v.type()) {
      case simdjson::dom::element_type::NULL_VALUE: values_[key] = std::monostate{}; break;
      case simdjson::dom::element_type::BOOL: values_[key] = bool(v.get_bool().value()); break;
      case simdjson::dom::element_type::INT64: values_[key] = std::int64_t(v.get_int64().value()); break;
      case simdjson::dom::element_type::UINT64:
        values_[key] = static_cast<double>(v.get_uint64().value());
        break;
      case simdjson::dom::element_type::DOUBLE: values_[key] = double(v.get_double().value()); break;
      case simdjson::dom::element_type::STRING: values_[key] = std::string(v.get_string().value()); break;
      default: break;  // arrays and objects are not scalars
    }
  }
}

const JsonScalars::Value& JsonScalars::at(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw Error(what_ + " has no '" + key + "'");
  return it->second;
}

std::string JsonScalars::show(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return {};
  const Value& v = it->second;
  if (std::holds_alternative<std::monostate>(v)) return "null";
  if (auto b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto d = std::get_if<double>(&v)) return python_float_repr(*d);
  return std::get<std::string>(v);
}

std::int64_t JsonScalars::integer(const std::string& key) const {
  if (auto i = std::get_if<std::int64_t>(&at(key))) return *i;
  throw Error(what_ + ": '" + key + "' is not an integer");
}

double JsonScalars::real(const std::string& key) const {
  const Value& v = at(key);
  if (auto d = std::get_if<double>(&v)) return *d;
  if (auto i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  throw Error(what_ + ": '" + key + "' is not a number");
}

std::string JsonScalars::text(const std::string& key) const {
  if (auto s = std::get_if<std::string>(&at(key))) return *s;
  throw Error(what_ + ": '" + key + "' is not a string");
}

}  // namespace mgt
