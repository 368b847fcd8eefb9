// The requested fields of one JSON line, as Megatron's preprocess_data.py sees them after
// json.loads: a string is one text, a list of strings is a document already split into
// sentences (spec/megatron.md §2). Everything else is refused with a message saying why.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

class JsonDocumentParser {
public:
  // keys: the --json-keys, distinct and non-empty. lists: whether a value may be a list of
  // strings (a caller that takes one string per line says "expected a string" of other types).
  explicit JsonDocumentParser(std::vector<std::string> keys, bool lists = true);
  ~JsonDocumentParser();
  JsonDocumentParser(const JsonDocumentParser&) = delete;
  JsonDocumentParser& operator=(const JsonDocumentParser&) = delete;

  // Parses one line (without its terminator). Throws mgt::Error with a message that names the
  // key at fault but not the location, which the caller knows and prefixes ("FILE:LINE: ").
  //
  // Accepted like json.loads: surrounding whitespace, escapes including surrogate pairs, keys
  // written with escapes, duplicate keys (the last one wins). Values of other keys are checked
  // as json.loads would check them (so NaN, Infinity, integers of any size and unpaired
  // surrogate escapes pass there) but not kept.
  // Refused: a line that is empty or not one JSON object, malformed JSON, invalid UTF-8 (raw, or
  // produced by an unpaired surrogate escape such as "\ud800", which json.loads would accept but
  // Megatron's tokenizers then fail on), a missing key, a value that is neither a string nor a
  // list of strings. An empty string is valid: it becomes an empty document, as in Megatron.
  void parse(std::string_view line);

  const std::vector<std::string>& keys() const;
  // The texts of key k from the last successful parse: one for a string, the elements of a
  // list (possibly none). Views stay valid until the next parse().
  std::span<const std::string_view> texts(std::size_t k) const;
  bool is_list(std::size_t k) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt
