// One definition per flag: its name, group, arity and metavar, its description, the options field
// it sets, the checks that concern it alone, and the name under which a run records it (Megatron's
// args name). A program lists its flags once, each bound to a field of an options value, and
// derives everything else from that list: the cxxopts declarations and --help (with "mgt: ",
// "(required)" and "(default: X)" written from the definition and the field's own default), the
// reading of a parsed command line, the per-flag validation and the record of the run. Checks
// between flags stay as code.
//
// An entry reads like argparse's add_argument:
//   store("num-layers", "N", options.model.num_layers, "Transformer layers").required()
// The list is built over the options value it fills: over a default-constructed one it describes
// the defaults, over a parsed one it reads the run's values.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/command_line.hpp"

namespace cxxopts {
class Options;
}

namespace mgt {

class FlagValues;

// A value as Megatron's args namespace holds it: None, a bool, an int, a float, a str or a list.
// An empty string counts as None: Megatron's string flags default to None, mgt's fields to "".
using ArgValue = std::variant<std::monostate, bool, std::int64_t, double, std::string, std::vector<std::string>,
                              std::vector<std::int64_t>>;

// How a default reads in "(default: X)": floats as Python prints them (1e-05, 0.0), lists
// space-separated, as they are typed; "" for None, an empty string and a switch's bool.
std::string describe_default(const ArgValue& value);

class FlagDefinition {
public:
  // `set` receives the values given on the command line (none for a switch, one, or several);
  // `read` returns the field's current value.
  using Setter = std::function<void(const std::vector<std::string>& values)>;
  using Reader = std::function<ArgValue()>;

  FlagDefinition(std::string name, FlagArity arity, std::string metavar, std::string help, Setter set, Reader read);

  // Modifiers, chained on an entry of a braced table.
  // "--X is required" when the field holds None (or an empty list) after parsing, followed by
  // ": WHAT" when `what` says what the flag names; "(required)" in --help.
  FlagDefinition&& required(std::string what = "") &&;
  // The values the field may hold, and Megatron's other choices, which are refused by name
  // ("--optimizer sgd is not supported by mgt-train (adam only)") rather than as unknown.
  FlagDefinition&& choices(std::vector<std::string> supported, std::vector<std::string> megatron_only = {}) &&;
  // One of Megatron's other choices refused with `reason` (what it needs, what to use instead)
  // in place of the list of supported ones.
  FlagDefinition&& refused_because(std::string choice, std::string reason) &&;
  // "(default: TEXT)" for a field whose default is not a value (None until validation derives it).
  FlagDefinition&& default_text(std::string text) &&;
  // The run records the field under `key` (default: the name with '-' as '_').
  FlagDefinition&& key(std::string key) &&;
  // The run records `value()` instead of the field (a value derived from other fields too).
  FlagDefinition&& recorded_as(Reader value) &&;
  // The run does not record the flag, for `reason`.
  FlagDefinition&& not_recorded(std::string reason) &&;
  // A Megatron-LM flag that Megatron's current pretraining parser (core/megatron_flags.hpp) lacks:
  // an older version's, or one of the Megatron script the program stands for. Flags in neither
  // are mgt's own, and their description begins with "mgt: ".
  FlagDefinition&& megatron_flag() &&;
  // The description of a shared definition in this program's role (mgt-index's --seq-length is
  // what it indexes for, not what it trains).
  FlagDefinition&& described_as(std::string help) &&;
  // A list flag whose repetitions add to the earlier values ("--input a --input b"), where
  // argparse's nargs would keep the last occurrence only.
  FlagDefinition&& appending() &&;

  const std::string& group() const { return group_; }
  const std::string& name() const { return name_; }  // without "--"
  std::string flag() const { return "--" + name_; }
  FlagArity arity() const { return arity_; }
  const std::string& metavar() const { return metavar_; }
  // The description as the entry gives it, without the marks help() adds: what another program
  // that takes the same flag in another role builds its own description from.
  const std::string& description() const { return help_; }
  // The --help description: "mgt: " for mgt's own flags, the text, " (required)", " (default: X)".
  std::string help() const;
  bool is_required() const { return required_; }
  const std::string& required_what() const { return required_what_; }
  const std::vector<std::string>& supported_choices() const { return choices_; }
  const std::vector<std::string>& megatron_only_choices() const { return megatron_only_choices_; }
  // Why `choice` is refused; "" where the entry gives no reason.
  std::string refusal_reason(const std::string& choice) const;
  bool is_megatron_flag() const;
  const std::string& record_key() const { return key_; }  // "" when not recorded
  const std::string& not_recorded_reason() const { return not_recorded_reason_; }

  void set(const std::vector<std::string>& values) const { set_(values); }
  ArgValue value() const { return read_(); }
  ArgValue recorded_value() const { return record_ ? record_() : read_(); }

private:
  friend std::vector<FlagDefinition> flag_groups(
      std::initializer_list<std::pair<const char*, std::vector<FlagDefinition>>> groups);

  std::string group_;
  std::string name_;
  FlagArity arity_;
  std::string metavar_;
  std::string help_;
  Setter set_;
  Reader read_;
  Reader record_;
  bool required_ = false;
  std::string required_what_;
  bool megatron_flag_ = false;
  std::vector<std::string> choices_;
  std::vector<std::string> megatron_only_choices_;
  std::map<std::string, std::string> refusal_reasons_;
  std::optional<std::string> default_text_;
  std::string key_;
  std::string not_recorded_reason_;
};

// The table: groups in --help order, each with its flags in order.
std::vector<FlagDefinition> flag_groups(
    std::initializer_list<std::pair<const char*, std::vector<FlagDefinition>>> groups);

// The tables concatenated, in order, for a group made of shared parts and a program's own flags.
std::vector<FlagDefinition> joined_flags(std::initializer_list<std::vector<FlagDefinition>> parts);

// A switch (argparse store_true): given, the field becomes true.
FlagDefinition store_true(std::string name, bool& field, std::string help);
// A switch (argparse store_false): given, the field becomes false. Megatron records the field
// under its own name (--disable-bias-linear: add_bias_linear), so entries say key().
FlagDefinition store_false(std::string name, bool& field, std::string help);
// A switch Megatron keeps as a bool, kept here as one value of an enum field (--bf16, --fp16):
// given, the field becomes `setting`; recorded as whether it holds it.
template <class Enum>
FlagDefinition store_true_as(std::string name, Enum& field, Enum setting, std::string help) {
  return FlagDefinition(std::move(name), FlagArity::None, "", std::move(help),
                        [&field, setting](const std::vector<std::string>&) { field = setting; },
                        [&field, setting]() -> ArgValue { return field == setting; });
}

// A flag with one value (argparse store), read as the field's type: integers and reals as
// parse_integer_flag and parse_real_flag read them (with the flag's range, core/flag_ranges.hpp).
FlagDefinition store(std::string name, std::string metavar, std::int64_t& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, int& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, std::uint64_t& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, double& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, std::string& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, std::optional<std::int64_t>& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, std::optional<double>& field, std::string help);
FlagDefinition store(std::string name, std::string metavar, std::optional<std::string>& field, std::string help);

// A flag with several values (argparse nargs='*'): a repeated flag replaces the earlier values.
FlagDefinition store_list(std::string name, std::string metavar, std::vector<std::string>& field, std::string help);
FlagDefinition store_list(std::string name, std::string metavar, std::optional<std::vector<std::string>>& field,
                          std::string help);
FlagDefinition store_list(std::string name, std::string metavar, std::vector<std::int64_t>& field,
                          std::string help);

// A flag whose values become a field some other way (--rampup-batch-size's three numbers).
FlagDefinition custom_flag(std::string name, FlagArity arity, std::string metavar, std::string help,
                           FlagDefinition::Setter set, FlagDefinition::Reader read);

// Declares the flags in their groups, described by help().
void declare_flags(cxxopts::Options& options, std::span<const FlagDefinition> flags);

// "--name" -> arity, for CommandLineRules::known.
std::map<std::string, FlagArity> flag_arities(std::span<const FlagDefinition> flags);

// Sets the field of every flag the command line gave, in table order.
void set_given_flags(std::span<const FlagDefinition> flags, const FlagValues& given);

// set_given_flags, then check_flag_values: a program whose per-flag checks need no value derived
// from other flags first (mgt-train derives some, and checks later).
void read_flags(std::span<const FlagDefinition> flags, const FlagValues& given, std::string_view program);

// The entry named `name` (without "--"), to reuse a shared definition; throws mgt::Error when
// there is none.
const FlagDefinition& find_flag(std::span<const FlagDefinition> flags, std::string_view name);

// Whether the command line gave any of `flags`.
bool any_flag_given(std::span<const FlagDefinition> flags, const FlagValues& given);

// The per-flag checks on the fields' current values, in table order: required flags present,
// choices among the supported ones (Megatron's others refused naming `program`), numbers within
// the flag's range. Throws mgt::UsageError naming the flag.
void check_flag_values(std::span<const FlagDefinition> flags, std::string_view program);

}  // namespace mgt
