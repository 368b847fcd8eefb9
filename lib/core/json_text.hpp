// Writing JSON text by hand for small outputs (summaries, descriptions): string escaping and
// Python-compatible float formatting. Parsing uses simdjson elsewhere.
#pragma once
#include <string>
#include <string_view>

namespace mgt {

// A quoted JSON string; non-ASCII is escaped as \uXXXX (surrogate pairs) like Python's
// json.dumps with ensure_ascii=True, so text we write matches text Python writes.
std::string json_quote(std::string_view utf8);

// A double as Python's repr() prints it (shortest round-trip, "1.0" not "1", "1e-05").
// Non-finite values come out as json.dumps writes them ("NaN", "Infinity"), which is not JSON:
// use it for messages, and json_float for JSON.
std::string python_float_repr(double value);

// A double as a JSON number: python_float_repr for a finite value, "null" otherwise. Strict JSON
// has no NaN or Infinity; a writer that may meet them says why its value is null beside it.
std::string json_float(double value);

}  // namespace mgt
