// The scalar members of one flat JSON object, read by key with the reader's name in every error:
// checkpoints, Hugging Face configs and run records all carry such objects.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace mgt {

// The scalar members of one flat JSON object; nested values are skipped; an integer wider than
// 64 bits is a double. Throws mgt::Error naming `what` when the text is not a JSON object.
class JsonScalars {
public:
  using Value = std::variant<std::monostate, bool, std::int64_t, double, std::string>;  // monostate: null

  JsonScalars(const std::string& text, const std::string& what);

  bool contains(const std::string& key) const { return values_.count(key) > 0; }
  // A human-readable rendering of a value ("null", "64", "0.1", "LayerNorm"); "" when absent.
  std::string show(const std::string& key) const;
  // Throw mgt::Error naming `what` and the key when absent or of another type (an integer
  // reads as a double too).
  std::int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  std::string text(const std::string& key) const;

private:
  const Value& at(const std::string& key) const;
  std::string what_;
  std::map<std::string, Value> values_;
};

}  // namespace mgt
