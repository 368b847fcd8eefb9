#include "data/python_json.hpp"

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace mgt {

PyValue& PyValue::set(std::string key, PyValue value) {
  auto* d = std::get_if<Dict>(&value_);
  if (!d) throw Error("internal error: PyValue::set on a value that is not a dict");
  d->emplace_back(std::move(key), std::move(value));
  return *this;
}

PyValue& PyValue::append(PyValue value) {
  auto* l = std::get_if<List>(&value_);
  if (!l) throw Error("internal error: PyValue::append on a value that is not a list");
  l->push_back(std::move(value));
  return *this;
}

std::string PyValue::dumps() const {
  std::string out;
  write(out, 0);
  return out;
}

void PyValue::write(std::string& out, int level) const {
  auto newline = [&out](int lvl) {
    out += '\n';
    out.append(static_cast<std::size_t>(lvl) * 4, ' ');
  };
  if (std::holds_alternative<std::monostate>(value_)) {
    out += "null";
  } else if (auto* b = std::get_if<bool>(&value_)) {
    out += *b ? "true" : "false";
  } else if (auto* i = std::get_if<std::int64_t>(&value_)) {
    out += std::to_string(*i);
  } else if (auto* d = std::get_if<double>(&value_)) {
    out += json_float(*d);  // strict JSON: null for NaN and infinities
  } else if (auto* s = std::get_if<std::string>(&value_)) {
    out += json_quote(*s);
  } else if (auto* l = std::get_if<List>(&value_)) {
    if (l->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t k = 0; k < l->size(); ++k) {
      if (k > 0) out += ',';
      newline(level + 1);
      (*l)[k].write(out, level + 1);
    }
    newline(level);
    out += ']';
  } else if (auto* m = std::get_if<Dict>(&value_)) {
    if (m->empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t k = 0; k < m->size(); ++k) {
      if (k > 0) out += ',';
      newline(level + 1);
      out += json_quote((*m)[k].first);
      out += ": ";
      (*m)[k].second.write(out, level + 1);
    }
    newline(level);
    out += '}';
  }
}

}  // namespace mgt
