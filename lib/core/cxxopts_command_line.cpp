#include "core/cxxopts_command_line.hpp"

#include "core/error.hpp"

namespace mgt {

std::map<std::string, FlagArity> declared_flags(const cxxopts::Options& options,
                                                const std::map<std::string, FlagArity>& lists) {
  std::map<std::string, FlagArity> known;
  for (const auto& group : options.groups())
    for (const auto& option : options.group_help(group).options) {
      const std::string name = "--" + option.l.back();
      auto list = lists.find(name);
      known[name] = list != lists.end() ? list->second
                    : option.is_boolean  ? FlagArity::None
                                         : FlagArity::One;
    }
  return known;
}

ParsedCommandLine parse_command_line(cxxopts::Options& options, int argc, const char* const* argv,
                                     const CommandLineRules& rules, std::string_view program) {
  NormalizedCommandLine normalized = normalize_command_line(argc, argv, rules, program);
  std::vector<char*> cargs;
  for (auto& a : normalized.args) cargs.push_back(a.data());
  try {
    return {options.parse(static_cast<int>(cargs.size()), cargs.data()), std::move(normalized.ignored)};
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + " (see --help)");
  }
}

void add_version_flag(cxxopts::Options& options, const std::string& group) {
  options.add_options(group)("version", "Print the version and exit");
}

std::vector<std::string> FlagValues::list(const char* name) const {
  return has(name) ? result_[name].as<std::vector<std::string>>() : std::vector<std::string>{};
}

std::int64_t FlagValues::integer(const char* name) const {
  return parse_integer_flag(std::string("--") + name, text(name));
}

double FlagValues::real(const char* name) const {
  return parse_real_flag(std::string("--") + name, text(name));
}

}  // namespace mgt
