#include "data/json_document.hpp"

#include <simdjson.h>

#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace mgt {
namespace {

namespace od = simdjson::ondemand;

const char* type_name(od::json_type t) {
  switch (t) {
    case od::json_type::array: return "a list";
    case od::json_type::object: return "an object";
    case od::json_type::number: return "a number";
    case od::json_type::string: return "a string";
    case od::json_type::boolean: return "a boolean";
    case od::json_type::null: return "null";
  }
  return "an unknown value";
}

[[noreturn]] void malformed(simdjson::error_code e) {
  if (e == simdjson::UTF8_ERROR) throw Error("invalid UTF-8 in the line");
  throw Error(std::string("malformed JSON (") + simdjson::error_message(e) + ")");
}

// JSON's number grammar, plus the constants json.loads also accepts. Checked on the raw token
// so that integers of any size pass, as in Python.
bool is_python_json_number(std::string_view t) {
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\n' || t.back() == '\r'))
    t.remove_suffix(1);
  if (t == "NaN" || t == "Infinity" || t == "-Infinity") return true;
  std::size_t i = 0;
  auto digit = [&](std::size_t j) { return j < t.size() && t[j] >= '0' && t[j] <= '9'; };
  if (i < t.size() && t[i] == '-') ++i;
  if (!digit(i)) return false;
  if (t[i] == '0') {
    ++i;
  } else {
    while (digit(i)) ++i;
  }
  if (i < t.size() && t[i] == '.') {
    if (!digit(++i)) return false;
    while (digit(i)) ++i;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == t.size();
}

// The escapes of a raw JSON string (from just after its opening quote) are well formed.
// json.loads accepts unpaired surrogate escapes such as "\ud800", which simdjson refuses; they
// matter only in text that gets tokenized, so elsewhere this check decides instead.
bool raw_string_escapes_valid(const char* p) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  for (;; ++p) {
    if (*p == '"') return true;
    if (*p != '\\') continue;
    ++p;
    if (*p == 'u') {
      for (int i = 1; i <= 4; ++i)
        if (!hex(p[i])) return false;
      p += 4;
    } else if (std::strchr("\"\\/bfnrt", *p) == nullptr || *p == '\0') {
      return false;
    }
  }
}

bool all_whitespace(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return false;
  return true;
}

// Where the first top-level JSON object or array of `line` ends (just past its closing bracket),
// brackets inside strings aside; npos when it does not end. simdjson reports a line that goes on
// after its object as an object ending early; this lets the message say what json.loads says.
std::size_t end_of_first_value(std::string_view line) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// Whether the line is wholly a value of `type`, as simdjson's type() tells it from the first
// character alone ("nope" would be null): scalars are checked, strings and arrays taken as named.
bool whole_line_is(od::json_type type, std::string_view line) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!line.empty() && space(line.front())) line.remove_prefix(1);
  while (!line.empty() && space(line.back())) line.remove_suffix(1);
  switch (type) {
    case od::json_type::null: return line == "null";
    case od::json_type::boolean: return line == "true" || line == "false";
    case od::json_type::number: return is_python_json_number(line);
    default: return true;
  }
}

// malformed(e) for a whole line: the causes simdjson's codes misname, then its own words.
[[noreturn]] void malformed_line(simdjson::error_code e, std::string_view line) {
  // The reader drops a file's leading byte-order mark; one on a later line is refused, as
  // json.loads refuses it ("Unexpected UTF-8 BOM").
  if (line.substr(0, 3) == "\xEF\xBB\xBF")
    throw Error("malformed JSON (a UTF-8 byte-order mark starts the line; only the file's first line may have one)");
  const std::size_t end = end_of_first_value(line);
  if (end != std::string_view::npos && !all_whitespace(line.substr(end)))
    throw Error("malformed JSON (unexpected content after the object)");
  malformed(e);
}

}  // namespace

struct JsonDocumentParser::Impl {
  std::vector<std::string> keys;
  bool lists = true;
  od::parser parser;
  // The line is copied into a buffer with simdjson's read-past padding; cheap next to parsing.
  std::vector<char> padded;
  std::vector<std::vector<std::string_view>> texts;
  std::vector<char> is_list;
  std::vector<char> found;

  std::size_t key_index(std::string_view key) const {
    for (std::size_t k = 0; k < keys.size(); ++k)
      if (keys[k] == key) return k;
    return keys.size();
  }

  void check_text(std::size_t k, std::string_view s) const {
    if (utf8::find_invalid(s))
      throw Error("key '" + keys[k] +
                  "': text is not valid Unicode (an unpaired surrogate escape such as \\ud800)");
  }

  [[noreturn]] void bad_string(std::size_t k, simdjson::error_code e) const {
    if (e != simdjson::STRING_ERROR) malformed(e);
    throw Error("key '" + keys[k] +
                "': invalid string (a bad escape, or an unpaired surrogate escape such as \\ud800)");
  }

  // Values of other keys are not needed, but json.loads would refuse a malformed one, so they
  // are walked and checked (strings unescaped, numbers by their grammar) without being kept.
  void check_skipped(od::value value) {
    od::json_type type;
    if (value.type().get(type) != simdjson::SUCCESS) {
      // NaN and Infinity do not start like any JSON value but json.loads takes them.
      std::string_view raw = value.raw_json_token();
      if (is_python_json_number(raw)) return;
      throw Error("malformed JSON (a value of another key is not valid JSON)");
    }
    switch (type) {
      case od::json_type::array: {
        od::array array;
        if (auto e = value.get_array().get(array)) malformed(e);
        for (auto element_result : array) {
          od::value element;
          if (auto e = std::move(element_result).get(element)) malformed(e);
          check_skipped(element);
        }
        return;
      }
      case od::json_type::object: {
        od::object object;
        if (auto e = value.get_object().get(object)) malformed(e);
        for (auto field_result : object) {
          od::field field;
          if (auto e = std::move(field_result).get(field)) malformed(e);
          check_key(field);
          check_skipped(field.value());
        }
        return;
      }
      case od::json_type::string: {
        std::string_view s;
        if (auto e = value.get_string().get(s)) {
          if (e != simdjson::STRING_ERROR || !raw_string_escapes_valid(value.raw_json_token().data() + 1))
            malformed(e);
        }
        return;
      }
      case od::json_type::number:
        if (!is_python_json_number(value.raw_json_token()))
          throw Error("malformed JSON (bad number in a value of another key)");
        return;
      case od::json_type::boolean: {
        bool b;
        if (auto e = value.get_bool().get(b)) malformed(e);
        return;
      }
      case od::json_type::null: {
        bool is_null = false;
        if (value.is_null().get(is_null) != simdjson::SUCCESS || !is_null)
          throw Error("malformed JSON (a value of another key is not valid JSON)");
        return;
      }
    }
  }

  // The key of a field, unescaped; "" (matching no requested key) for a key that only
  // json.loads accepts (an unpaired surrogate escape).
  std::string_view check_key(od::field& field) {
    const char* raw = field.key().raw();  // unescaping consumes the key: keep it for the check
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) {
      if (e != simdjson::STRING_ERROR || !raw_string_escapes_valid(raw)) malformed(e);
      return {};
    }
    return key;
  }

  void read_value(std::size_t k, od::value value) {
    auto& out = texts[k];
    out.clear();
    od::json_type type;
    if (auto e = value.type().get(type)) malformed(e);
    if (type == od::json_type::string) {
      std::string_view s;
      if (auto e = value.get_string().get(s)) bad_string(k, e);
      check_text(k, s);
      out.push_back(s);
      is_list[k] = 0;
      return;
    }
    if (type != od::json_type::array)
      throw Error("key '" + keys[k] + "' is " + type_name(type) +
                  (lists ? ", expected a string or a list of strings" : ", expected a string"));
    is_list[k] = 1;
    od::array array;
    if (auto e = value.get_array().get(array)) malformed(e);
    std::size_t index = 0;
    for (auto element_result : array) {
      od::value element;
      if (auto e = std::move(element_result).get(element)) malformed(e);
      od::json_type element_type;
      if (auto e = element.type().get(element_type)) malformed(e);
      if (element_type != od::json_type::string)
        throw Error("key '" + keys[k] + "': list element " + std::to_string(index) + " is " +
                    type_name(element_type) + ", expected a string");
      std::string_view s;
      if (auto e = element.get_string().get(s)) bad_string(k, e);
      check_text(k, s);
      out.push_back(s);
      ++index;
    }
  }
};

JsonDocumentParser::JsonDocumentParser(std::vector<std::string> keys, bool lists) : impl_(std::make_unique<Impl>()) {
  impl_->keys = std::move(keys);
  impl_->lists = lists;
  impl_->texts.resize(impl_->keys.size());
  impl_->is_list.resize(impl_->keys.size());
  impl_->found.resize(impl_->keys.size());
}

JsonDocumentParser::~JsonDocumentParser() = default;

const std::vector<std::string>& JsonDocumentParser::keys() const { return impl_->keys; }

std::span<const std::string_view> JsonDocumentParser::texts(std::size_t k) const {
  return impl_->texts.at(k);
}

bool JsonDocumentParser::is_list(std::size_t k) const { return impl_->is_list.at(k) != 0; }

void JsonDocumentParser::parse(std::string_view line) {
  auto& d = *impl_;
  if (all_whitespace(line)) throw Error("empty line (expected a JSON object)");
  const std::size_t capacity = line.size() + simdjson::SIMDJSON_PADDING;
  if (d.padded.size() < capacity) d.padded.resize(capacity + capacity / 4);
  std::memcpy(d.padded.data(), line.data(), line.size());
  std::memset(d.padded.data() + line.size(), ' ', simdjson::SIMDJSON_PADDING);
  std::fill(d.found.begin(), d.found.end(), 0);

  od::document doc;
  if (auto e = d.parser.iterate(d.padded.data(), line.size(), d.padded.size()).get(doc)) malformed_line(e, line);
  od::object object;
  if (auto e = doc.get_object().get(object)) {
    if (e == simdjson::INCORRECT_TYPE) {
      od::json_type type;
      if (doc.type().get(type) == simdjson::SUCCESS && whole_line_is(type, line))
        throw Error(std::string("the line is ") + type_name(type) + ", expected a JSON object");
    }
    malformed_line(e, line);
  }
  for (auto field_result : object) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) malformed_line(e, line);
    std::string_view key = d.check_key(field);
    std::size_t k = key.empty() ? d.keys.size() : d.key_index(key);
    if (k == d.keys.size()) {
      d.check_skipped(field.value());
      continue;
    }
    d.read_value(k, field.value());
    d.found[k] = 1;
  }
  // Only the end of input may follow the object (json.loads: "Extra data").
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS)
    throw Error("malformed JSON (unexpected content after the object)");
  for (std::size_t k = 0; k < d.keys.size(); ++k)
    if (!d.found[k]) throw Error("missing key '" + d.keys[k] + "'");
}

}  // namespace mgt
