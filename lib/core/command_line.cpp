#include "core/command_line.hpp"

#include <algorithm>
#include <cctype>
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

// "--split needs a value", for a flag followed by `next` (nullptr at the end of the command line).
// A following "-10,5,5" is no flag name: argparse refuses it as a value too (only numbers may
// begin with '-'), and one line says so instead of a second about an unknown flag "-10,5,5".
std::string missing_value(const std::string& name, const char* next) {
  if (next != nullptr && next[0] == '-' && std::isdigit(static_cast<unsigned char>(next[1])))
    return name + " needs a value: " + next + " begins with '-' (write " + name + "=" + next + ")";
  return name + " needs a value";
}

std::string refusal(const std::string& name, const CommandLineRules& rules, std::string_view program) {
  if (auto refused = rules.refused.find(name); refused != rules.refused.end())
    return name + " is not supported by " + std::string(program) + ": " + refused->second;
  if (rules.name_pretraining_flags && find_megatron_flag(name))
    return name + " is a Megatron-LM flag that " + std::string(program) + " does not support";
  return "unknown flag " + name + " (see --help)";
}

// Whether a flag the program does not take would take values: Megatron's switches do not; any
// other flag is taken to own the arguments up to the next flag, so that they are not reported
// again as stray arguments.
bool owns_following_values(const std::string& name) {
  const auto megatron = find_megatron_flag(name);
  return !(megatron && (megatron->action == "StoreTrueAction" || megatron->action == "StoreFalseAction"));
}

// The problem with `value` of the ignored flag `name`, "" when there is none.
std::string ignored_value_problem(const std::string& name, const std::string& value, const IgnoredFlag& flag,
                                  std::string_view program) {
  if (auto refused = flag.refused_values.find(value); refused != flag.refused_values.end())
    return name + " " + value + " is not supported by " + std::string(program) + ": " + refused->second;
  try {
    if (flag.integer) parse_integer_flag(name, value);
    if (flag.real) parse_real_flag(name, value);
    if (!flag.choices.empty()) {
      std::string listed;
      for (const auto& c : flag.choices) {
        if (c == value) return "";
        listed += (listed.empty() ? "" : ", ") + c;
      }
      return name + ": invalid choice '" + value + "' (choose from " + listed + ")";
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void record_ignored(std::vector<IgnoredFlagUse>& ignored, IgnoredFlagUse use) {
  std::erase_if(ignored, [&](const IgnoredFlagUse& u) { return u.flag == use.flag; });
  ignored.push_back(std::move(use));
}

// The flag `name` abbreviates (argparse's allow_abbrev), `name` itself when it abbreviates none
// or is a flag already; "" with `problem` set when it is ambiguous.
std::string expanded_abbreviation(const std::string& name, const CommandLineRules& rules, std::string& problem) {
  if (!rules.allow_abbreviations || name == "--help" || rules.known.count(name) || rules.refused.count(name) ||
      rules.ignored.count(name))
    return name;
  std::vector<std::string> matches;
  const auto consider = [&](const std::string& flag) {
    if (flag.rfind(name, 0) == 0 && std::find(matches.begin(), matches.end(), flag) == matches.end())
      matches.push_back(flag);
  };
  consider("--help");
  for (const auto& entry : rules.known) consider(entry.first);
  for (const auto& entry : rules.refused) consider(entry.first);
  for (const auto& entry : rules.ignored) consider(entry.first);
  if (matches.empty()) return name;
  if (matches.size() == 1) return matches[0];
  std::vector<std::string> preferred;
  for (const auto& flag : matches)
    if (std::find(rules.abbreviation_precedence.begin(), rules.abbreviation_precedence.end(), flag) !=
        rules.abbreviation_precedence.end())
      preferred.push_back(flag);
  if (preferred.size() == 1) return preferred[0];
  std::sort(matches.begin(), matches.end());
  problem = "ambiguous option: " + name + " could match ";
  for (std::size_t k = 0; k < matches.size(); ++k) problem += (k ? ", " : "") + matches[k];
  return "";
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += (text.empty() ? "" : "\n") + line;
  return text;
}

}  // namespace

NormalizedCommandLine normalize_command_line(int argc, const char* const* argv,
                                             const std::map<std::string, FlagArity>& known, std::string_view program) {
  return normalize_command_line(argc, argv, CommandLineRules{known, {}, true}, program);
}

NormalizedCommandLine normalize_command_line(int argc, const char* const* argv, const CommandLineRules& rules,
                                             std::string_view program) {
  const auto& known = rules.known;
  NormalizedCommandLine result;
  std::vector<std::string>& out = result.args;
  out.push_back(argc > 0 ? argv[0] : std::string(program));
  std::vector<std::string> problems;
  // Skips the arguments after argv[i] that are values, not flags; returns them.
  const auto following_values = [&](int& i) {
    std::vector<std::string> values;
    while (i + 1 < argc && !is_flag(argv[i + 1])) values.emplace_back(argv[++i]);
    return values;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      out.push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      problems.push_back(is_flag(arg) ? "unknown flag " + arg + " (see --help)"
                                      : "unexpected argument '" + arg + "' (see --help)");
      continue;
    }
    const auto eq = arg.find('=');
    const bool inline_value = eq != std::string::npos;
    std::string ambiguity;
    const std::string name = expanded_abbreviation(arg.substr(0, eq), rules, ambiguity);
    if (!ambiguity.empty()) {
      problems.push_back(ambiguity);
      if (!inline_value) following_values(i);
      continue;
    }
    if (name == "--help") {
      out.push_back(name);
      continue;
    }
    if (inline_value) arg = name + arg.substr(eq);
    else arg = name;
    auto flag = known.find(name);
    const bool refused = rules.refused.count(name) > 0;
    const IgnoredFlag* ignoring = nullptr;
    IgnoredFlag pretraining_flag;
    if (auto ignored = rules.ignored.find(name); ignored != rules.ignored.end()) {
      ignoring = &ignored->second;
    } else if (!rules.other_pretraining_flags_ignored_because.empty() && find_megatron_flag(name)) {
      // Its values up to the next flag, however many the script's flag takes.
      pretraining_flag.arity = owns_following_values(name) ? FlagArity::Many : FlagArity::None;
      pretraining_flag.reason = rules.other_pretraining_flags_ignored_because;
      ignoring = &pretraining_flag;
    }
    if (ignoring != nullptr && flag == known.end() && !refused) {
      const IgnoredFlag& rule = *ignoring;
      std::string value;
      if (rule.arity == FlagArity::None) {
        if (inline_value) {
          problems.push_back(name + " takes no value");
          continue;
        }
      } else if (inline_value) {
        value = arg.substr(eq + 1);
      } else if (rule.arity == FlagArity::One) {
        if (i + 1 >= argc || is_flag(argv[i + 1])) {
          problems.push_back(missing_value(name, i + 1 < argc ? argv[i + 1] : nullptr));
          if (i + 1 < argc && std::isdigit(static_cast<unsigned char>(argv[i + 1][1]))) ++i;
          continue;
        }
        value = argv[++i];
      } else {
        const std::vector<std::string> values = following_values(i);
        if (values.empty()) {
          problems.push_back(name + " needs at least one value");
          continue;
        }
        for (const auto& v : values) value += (value.empty() ? "" : " ") + v;
      }
      if (rule.arity == FlagArity::One || (rule.arity != FlagArity::None && inline_value)) {
        if (std::string problem = ignored_value_problem(name, value, rule, program); !problem.empty()) {
          problems.push_back(problem);
          continue;
        }
      }
      record_ignored(result.ignored, {name, value, rule.reason});
      continue;
    }
    if (flag == known.end() || refused) {
      problems.push_back(refusal(name, rules, program));
      if (!inline_value && owns_following_values(name)) following_values(i);
      continue;
    }
    const FlagArity arity = flag->second;
    if (arity == FlagArity::None) {
      if (inline_value) problems.push_back(name + " takes no value");
      else out.push_back(arg);
      continue;
    }
    if (arity == FlagArity::Many) {
      // argparse: the last occurrence wins.
      std::erase_if(out, [&](const std::string& a) { return a.rfind(name + "=", 0) == 0; });
    }
    if (inline_value) {
      out.push_back(arg);
      continue;
    }
    if (arity == FlagArity::One) {
      if (i + 1 >= argc || is_flag(argv[i + 1])) {
        problems.push_back(missing_value(name, i + 1 < argc ? argv[i + 1] : nullptr));
        if (i + 1 < argc && std::isdigit(static_cast<unsigned char>(argv[i + 1][1]))) ++i;  // said above
      } else {
        out.push_back(name + "=" + argv[++i]);
      }
      continue;
    }
    const std::vector<std::string> values = following_values(i);
    if (values.empty()) problems.push_back(name + " needs at least one value");
    for (const auto& v : values) out.push_back(name + "=" + v);
  }
  if (!problems.empty()) throw UsageError(joined_lines(problems));
  return result;
}

std::string ignored_flags_line(std::string_view program, const std::vector<IgnoredFlagUse>& ignored) {
  if (ignored.empty()) return "";
  std::string line = std::string(program) + ": ignored flags (they change nothing here): ";
  // Flags in a row with one reason share it: "--a 1, --b (reason); --c (another)".
  for (std::size_t k = 0; k < ignored.size(); ++k) {
    const IgnoredFlagUse& u = ignored[k];
    const bool same_as_before = k > 0 && ignored[k - 1].reason == u.reason;
    line += (k == 0 ? "" : same_as_before ? ", " : "; ") + u.flag + (u.value.empty() ? "" : " " + u.value);
    if (k + 1 == ignored.size() || ignored[k + 1].reason != u.reason) line += " (" + u.reason + ")";
  }
  return line;
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
