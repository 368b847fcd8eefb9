// JSON integers wider than 64 bits. Python writes any int into JSON, and transformers writes
// `"model_max_length": 1000000000000000019884624838656` (int(1e30), its "no maximum") into
// tokenizer_config.json; simdjson 3.0 (Debian 12) refuses such a number as a parse error, so the
// whole file would be "not valid JSON". These helpers find such integers, and rewrite them as
// reals (appending ".0"), which simdjson reads as doubles — what Python's json gives a float
// consumer of them, and enough for limits that mean "unbounded".
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

struct WideJsonInteger {
  std::size_t offset = 0;  // of its first character in the text
  std::string literal;     // as written, e.g. "-123456789012345678901"
  // Where it is, as a path from the top: "model_max_length", "a.b[2]"; "" at the top.
  std::string path;
};

// The integers of a JSON text below INT64_MIN or above UINT64_MAX, in order. Strings are
// skipped; text that is not JSON gives what it gives (the parser reports the error after).
std::vector<WideJsonInteger> find_wide_json_integers(std::string_view text);

// The text with each wide integer written as a real ("1e30"-sized "100…0" becomes "100…0.0"),
// unchanged when there is none.
std::string json_with_wide_integers_as_reals(std::string_view text);

}  // namespace mgt
