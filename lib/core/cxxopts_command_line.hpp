// cxxopts behind normalize_command_line, set up once for every program. Values are never split
// at commas (paths and --split contain them): one value per occurrence. Files include cxxopts only
// through this header, so that every one of them compiles it with the same setting.
#pragma once
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/command_line.hpp"

namespace mgt {

// The arity of every flag `options` declares ("--name" -> arity): switches take no value, other
// flags one, unless `lists` gives the flag a multi-value arity.
std::map<std::string, FlagArity> declared_flags(const cxxopts::Options& options,
                                                const std::map<std::string, FlagArity>& lists = {});

struct ParsedCommandLine {
  cxxopts::ParseResult flags;
  std::vector<IgnoredFlagUse> ignored;  // for ignored_flags_line()
};

// normalize_command_line with `rules`, then cxxopts; cxxopts's own errors become usage errors.
ParsedCommandLine parse_command_line(cxxopts::Options& options, int argc, const char* const* argv,
                                     const CommandLineRules& rules, std::string_view program);

// Declares --version in `group`. The program's skeleton (core/program_main.hpp) answers it before
// any parsing; declaring it lists it in --help and lets it pass normalization.
void add_version_flag(cxxopts::Options& options, const std::string& group);

// Typed reads of a parse result, by flag name without "--". Values are declared as strings and
// converted here, so that an error names its flag. set() leaves the field alone when the flag was
// not given; text(), integer() and real() also read cxxopts's declared default.
class FlagValues {
public:
  explicit FlagValues(const cxxopts::ParseResult& result) : result_(result) {}

  bool has(const char* name) const { return result_.count(name) > 0; }
  std::string text(const char* name) const { return result_[name].as<std::string>(); }
  std::vector<std::string> list(const char* name) const;
  std::int64_t integer(const char* name) const;
  double real(const char* name) const;

  void set(const char* name, bool& field) const { if (has(name)) field = true; }
  void set(const char* name, std::string& field) const { if (has(name)) field = text(name); }
  void set(const char* name, std::optional<std::string>& field) const { if (has(name)) field = text(name); }
  void set(const char* name, std::int64_t& field) const { if (has(name)) field = integer(name); }
  void set(const char* name, std::optional<std::int64_t>& field) const { if (has(name)) field = integer(name); }
  void set(const char* name, double& field) const { if (has(name)) field = real(name); }
  void set(const char* name, std::optional<double>& field) const { if (has(name)) field = real(name); }
  void set(const char* name, std::vector<std::string>& field) const { if (has(name)) field = list(name); }

private:
  const cxxopts::ParseResult& result_;
};

}  // namespace mgt
