#include "core/command_line.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.hpp"
#include "core/flag_ranges.hpp"
#include "core/megatron_flags.hpp"

namespace mgt {

namespace {

// argparse treats "-5" and "-1e-3" as values, not flags, when no flag looks like a number.
bool looks_like_negative_number(std::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  char* end = nullptr;
  std::string s(arg);
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

bool is_flag(std::string_view arg) { return arg.size() > 1 && arg[0] == '-' && !looks_like_negative_number(arg); }

[[noreturn]] void refuse_unknown(const std::string& name, const CommandLineRules& rules,
                                 std::string_view program) {
  if (auto refused = rules.refused.find(name); refused != rules.refused.end())
    throw UsageError(name + " is not supported by " + std::string(program) + ": " + refused->second);
  if (rules.name_pretraining_flags && find_megatron_flag(name))
    throw UsageError(name + " is a Megatron-LM flag that " + std::string(program) + " does not support");
  throw UsageError("unknown flag " + name + " (see --help)");
}

}  // namespace

std::vector<std::string> normalize_command_line(int argc, const char* const* argv,
                                                const std::map<std::string, FlagArity>& known,
                                                std::string_view program) {
  return normalize_command_line(argc, argv, CommandLineRules{known, {}, true}, program);
}

std::vector<std::string> normalize_command_line(int argc, const char* const* argv,
                                                const CommandLineRules& rules, std::string_view program) {
  const auto& known = rules.known;
  std::vector<std::string> out{argc > 0 ? argv[0] : std::string(program)};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      out.push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (is_flag(arg)) throw UsageError("unknown flag " + arg + " (see --help)");
      throw UsageError("unexpected argument '" + arg + "' (see --help)");
    }
    const auto eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    auto flag = known.find(name);
    if (flag == known.end() || rules.refused.count(name)) refuse_unknown(name, rules, program);
    const FlagArity arity = flag->second;
    if (arity == FlagArity::None) {
      if (eq != std::string::npos) throw UsageError(name + " takes no value");
      out.push_back(arg);
      continue;
    }
    if (arity == FlagArity::Many) {
      // argparse: the last occurrence wins.
      std::erase_if(out, [&](const std::string& a) { return a.rfind(name + "=", 0) == 0; });
    }
    if (eq != std::string::npos) {
      out.push_back(arg);
      continue;
    }
    if (arity == FlagArity::One) {
      if (i + 1 >= argc || is_flag(argv[i + 1])) throw UsageError(name + " needs a value");
      out.push_back(name + "=" + argv[++i]);
      continue;
    }
    int values = 0;
    while (i + 1 < argc && !is_flag(argv[i + 1])) {
      out.push_back(name + "=" + argv[++i]);
      ++values;
    }
    if (values == 0) throw UsageError(name + " needs at least one value");
  }
  return out;
}

std::int64_t parse_integer_flag(std::string_view flag, std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  const bool whole = !digits.empty() && ptr == digits.data() + digits.size();
  if (whole && ec == std::errc::result_out_of_range)
    throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is out of range");
  if (!whole || ec != std::errc())
    throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not an integer");
  check_flag_range(flag, static_cast<double>(value), text);
  return value;
}

double parse_real_flag(std::string_view flag, std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  // strtod also reads hexadecimal floats, which Python's float() does not.
  bool hex = s.find_first_of("xX") != std::string::npos;
  if (s.empty() || end != s.c_str() + s.size() || hex)
    throw UsageError(std::string(flag) + ": '" + s + "' is not a number");
  // Python's float() takes "inf" and "nan", and argparse with them; no flag means either.
  // strtod overflows to infinity; ERANGE with a finite result is an underflow.
  if (!std::isfinite(value)) throw UsageError(std::string(flag) + ": '" + s + "' is not a finite number");
  if (errno == ERANGE)
    throw UsageError(std::string(flag) + ": '" + s + "' is too small to be represented (use 0)");
  check_flag_range(flag, value, text);
  return value;
}

void check_choice(std::string_view flag, std::string_view text,
                  std::initializer_list<std::string_view> choices) {
  std::string listed;
  for (auto c : choices) {
    if (c == text) return;
    listed += (listed.empty() ? "" : ", ") + std::string(c);
  }
  throw UsageError(std::string(flag) + ": invalid choice '" + std::string(text) + "' (choose from " +
                   listed + ")");
}

}  // namespace mgt
