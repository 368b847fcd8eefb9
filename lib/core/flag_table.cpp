#include "core/flag_table.hpp"

#include <algorithm>
#include <limits>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/flag_ranges.hpp"
#include "core/json_text.hpp"
#include "core/megatron_flags.hpp"

namespace mgt {

namespace {

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

// "adam only", "learned_absolute, rope or none": what a refused Megatron choice is told to use.
std::string what_works(const std::vector<std::string>& choices) {
  if (choices.size() == 1) return choices[0] + " only";
  std::vector<std::string> head(choices.begin(), choices.end() - 1);
  return joined(head, ", ") + " or " + choices.back();
}

std::string underscored(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

const std::string& only_value(const std::vector<std::string>& values) { return values.at(0); }

// Fields are bound by reference: the table lives no longer than the options value it was built over.
template <class T>
FlagDefinition one_value(std::string name, std::string metavar, T& field, std::string help,
                         std::function<T(const std::string& flag, const std::string& text)> parse,
                         std::function<ArgValue(const T&)> read) {
  const std::string flag = "--" + name;
  return FlagDefinition(
      std::move(name), FlagArity::One, std::move(metavar), std::move(help),
      [&field, flag, parse](const std::vector<std::string>& values) { field = parse(flag, only_value(values)); },
      [&field, read]() { return read(field); });
}

std::int64_t integer(const std::string& flag, const std::string& text) { return parse_integer_flag(flag, text); }
double real(const std::string& flag, const std::string& text) { return parse_real_flag(flag, text); }
std::string as_text(const std::string&, const std::string& value) { return value; }

template <class T>
ArgValue optional_value(const std::optional<T>& v) {
  return v ? ArgValue(*v) : ArgValue();
}

}  // namespace

std::string describe_default(const ArgValue& value) {
  struct Describe {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool) const { return ""; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return python_float_repr(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const std::vector<std::string>& v) const { return joined(v, " "); }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      std::vector<std::string> items;
      for (std::int64_t i : v) items.push_back(std::to_string(i));
      return joined(items, " ");
    }
  };
  return std::visit(Describe{}, value);
}

FlagDefinition::FlagDefinition(std::string name, FlagArity arity, std::string metavar, std::string help, Setter set,
                               Reader read)
    : name_(std::move(name)), arity_(arity), metavar_(std::move(metavar)), help_(std::move(help)),
      set_(std::move(set)), read_(std::move(read)), key_(underscored(name_)) {}

FlagDefinition&& FlagDefinition::required(std::string what) && {
  required_ = true;
  required_what_ = std::move(what);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::choices(std::vector<std::string> supported, std::vector<std::string> megatron_only) && {
  choices_ = std::move(supported);
  megatron_only_choices_ = std::move(megatron_only);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::refused_because(std::string choice, std::string reason) && {
  if (std::find(megatron_only_choices_.begin(), megatron_only_choices_.end(), choice) == megatron_only_choices_.end())
    megatron_only_choices_.push_back(choice);
  refusal_reasons_[std::move(choice)] = std::move(reason);
  return std::move(*this);
}

std::string FlagDefinition::refusal_reason(const std::string& choice) const {
  const auto it = refusal_reasons_.find(choice);
  return it == refusal_reasons_.end() ? std::string() : it->second;
}

FlagDefinition&& FlagDefinition::default_text(std::string text) && {
  default_text_ = std::move(text);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::key(std::string key) && {
  key_ = std::move(key);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::recorded_as(Reader value) && {
  record_ = std::move(value);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::not_recorded(std::string reason) && {
  key_.clear();
  not_recorded_reason_ = std::move(reason);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::megatron_flag() && {
  megatron_flag_ = true;
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::described_as(std::string help) && {
  help_ = std::move(help);
  return std::move(*this);
}

FlagDefinition&& FlagDefinition::appending() && {
  if (arity_ == FlagArity::Many) arity_ = FlagArity::ManyAppending;
  return std::move(*this);
}

bool FlagDefinition::is_megatron_flag() const { return megatron_flag_ || find_megatron_flag(flag()).has_value(); }

std::string FlagDefinition::help() const {
  std::string text = (is_megatron_flag() ? "" : "mgt: ") + help_;
  if (required_) text += " (required)";
  const std::string shown = default_text_ ? *default_text_ : describe_default(value());
  if (!shown.empty()) text += " (default: " + shown + ")";
  return text;
}

std::vector<FlagDefinition> joined_flags(std::initializer_list<std::vector<FlagDefinition>> parts) {
  std::vector<FlagDefinition> flags;
  for (const auto& part : parts) flags.insert(flags.end(), part.begin(), part.end());
  return flags;
}

std::vector<FlagDefinition> flag_groups(
    std::initializer_list<std::pair<const char*, std::vector<FlagDefinition>>> groups) {
  std::vector<FlagDefinition> flags;
  for (const auto& [group, entries] : groups)
    for (const FlagDefinition& entry : entries) {
      flags.push_back(entry);
      flags.back().group_ = group;
    }
  return flags;
}

FlagDefinition store_true(std::string name, bool& field, std::string help) {
  return FlagDefinition(std::move(name), FlagArity::None, "", std::move(help),
                        [&field](const std::vector<std::string>&) { field = true; },
                        [&field]() -> ArgValue { return field; });
}

FlagDefinition store_false(std::string name, bool& field, std::string help) {
  return FlagDefinition(std::move(name), FlagArity::None, "", std::move(help),
                        [&field](const std::vector<std::string>&) { field = false; },
                        [&field]() -> ArgValue { return field; });
}

FlagDefinition store(std::string name, std::string metavar, std::int64_t& field, std::string help) {
  return one_value<std::int64_t>(std::move(name), std::move(metavar), field, std::move(help), integer,
                                 [](const std::int64_t& v) { return ArgValue(v); });
}

FlagDefinition store(std::string name, std::string metavar, int& field, std::string help) {
  const auto parse = [](const std::string& flag, const std::string& value) {
    const std::int64_t v = parse_integer_flag(flag, value);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      throw UsageError(flag + ": '" + value + "' is out of range");
    return static_cast<int>(v);
  };
  return one_value<int>(std::move(name), std::move(metavar), field, std::move(help), parse,
                        [](const int& v) { return ArgValue(std::int64_t{v}); });
}

FlagDefinition store(std::string name, std::string metavar, std::uint64_t& field, std::string help) {
  const auto parse = [](const std::string& flag, const std::string& value) {
    const std::int64_t v = parse_integer_flag(flag, value);
    if (v < 0) throw UsageError(flag + ": '" + value + "' is out of range");
    return static_cast<std::uint64_t>(v);
  };
  return one_value<std::uint64_t>(std::move(name), std::move(metavar), field, std::move(help), parse,
                                  [](const std::uint64_t& v) { return ArgValue(static_cast<std::int64_t>(v)); });
}

FlagDefinition store(std::string name, std::string metavar, double& field, std::string help) {
  return one_value<double>(std::move(name), std::move(metavar), field, std::move(help), real,
                           [](const double& v) { return ArgValue(v); });
}

FlagDefinition store(std::string name, std::string metavar, std::string& field, std::string help) {
  return one_value<std::string>(std::move(name), std::move(metavar), field, std::move(help), as_text,
                                [](const std::string& v) { return ArgValue(v); });
}

FlagDefinition store(std::string name, std::string metavar, std::optional<std::int64_t>& field, std::string help) {
  return one_value<std::optional<std::int64_t>>(std::move(name), std::move(metavar), field, std::move(help), integer,
                                                optional_value<std::int64_t>);
}

FlagDefinition store(std::string name, std::string metavar, std::optional<double>& field, std::string help) {
  return one_value<std::optional<double>>(std::move(name), std::move(metavar), field, std::move(help), real,
                                          optional_value<double>);
}

FlagDefinition store(std::string name, std::string metavar, std::optional<std::string>& field, std::string help) {
  return one_value<std::optional<std::string>>(std::move(name), std::move(metavar), field, std::move(help), as_text,
                                               optional_value<std::string>);
}

FlagDefinition store_list(std::string name, std::string metavar, std::vector<std::string>& field, std::string help) {
  return FlagDefinition(std::move(name), FlagArity::Many, std::move(metavar), std::move(help),
                        [&field](const std::vector<std::string>& values) { field = values; },
                        [&field]() -> ArgValue { return field; });
}

FlagDefinition store_list(std::string name, std::string metavar, std::optional<std::vector<std::string>>& field,
                          std::string help) {
  return FlagDefinition(std::move(name), FlagArity::Many, std::move(metavar), std::move(help),
                        [&field](const std::vector<std::string>& values) { field = values; },
                        [&field]() { return optional_value(field); });
}

FlagDefinition store_list(std::string name, std::string metavar, std::vector<std::int64_t>& field,
                          std::string help) {
  const std::string flag = "--" + name;
  return FlagDefinition(std::move(name), FlagArity::Many, std::move(metavar), std::move(help),
                        [&field, flag](const std::vector<std::string>& values) {
                          field.clear();
                          for (const std::string& v : values) field.push_back(parse_integer_flag(flag, v));
                        },
                        [&field]() -> ArgValue { return field; });
}

FlagDefinition custom_flag(std::string name, FlagArity arity, std::string metavar, std::string help,
                           FlagDefinition::Setter set, FlagDefinition::Reader read) {
  return FlagDefinition(std::move(name), arity, std::move(metavar), std::move(help), std::move(set), std::move(read));
}

void declare_flags(cxxopts::Options& options, std::span<const FlagDefinition> flags) {
  for (const FlagDefinition& f : flags) {
    auto adder = options.add_options(f.group());
    switch (f.arity()) {
      case FlagArity::None: adder(f.name(), f.help()); break;
      case FlagArity::One: adder(f.name(), f.help(), cxxopts::value<std::string>(), f.metavar()); break;
      case FlagArity::Many:
      case FlagArity::ManyAppending:
        adder(f.name(), f.help(), cxxopts::value<std::vector<std::string>>(), f.metavar());
        break;
    }
  }
}

std::map<std::string, FlagArity> flag_arities(std::span<const FlagDefinition> flags) {
  std::map<std::string, FlagArity> arities;
  for (const FlagDefinition& f : flags) arities[f.flag()] = f.arity();
  return arities;
}

void set_given_flags(std::span<const FlagDefinition> flags, const FlagValues& given) {
  for (const FlagDefinition& f : flags) {
    const char* name = f.name().c_str();
    if (!given.has(name)) continue;
    switch (f.arity()) {
      case FlagArity::None: f.set({}); break;
      case FlagArity::One: f.set({given.text(name)}); break;
      case FlagArity::Many:
      case FlagArity::ManyAppending: f.set(given.list(name)); break;
    }
  }
}

void read_flags(std::span<const FlagDefinition> flags, const FlagValues& given, std::string_view program) {
  set_given_flags(flags, given);
  check_flag_values(flags, program);
}

const FlagDefinition& find_flag(std::span<const FlagDefinition> flags, std::string_view name) {
  const auto it = std::find_if(flags.begin(), flags.end(), [&](const FlagDefinition& f) { return f.name() == name; });
  if (it == flags.end()) throw Error("no flag --" + std::string(name) + " in the table");
  return *it;
}

bool any_flag_given(std::span<const FlagDefinition> flags, const FlagValues& given) {
  return std::any_of(flags.begin(), flags.end(), [&](const FlagDefinition& f) { return given.has(f.name().c_str()); });
}

void check_flag_values(std::span<const FlagDefinition> flags, std::string_view program) {
  for (const FlagDefinition& f : flags) {
    const std::string flag = f.flag();
    const ArgValue value = f.value();
    const auto* text = std::get_if<std::string>(&value);
    const auto* list = std::get_if<std::vector<std::string>>(&value);
    if (f.is_required() &&
        (std::holds_alternative<std::monostate>(value) || (text && text->empty()) || (list && list->empty())))
      throw UsageError(flag + " is required" + (f.required_what().empty() ? "" : ": " + f.required_what()));
    if (text && !f.supported_choices().empty()) {
      const auto& refused = f.megatron_only_choices();
      if (std::find(refused.begin(), refused.end(), *text) != refused.end()) {
        const std::string reason = f.refusal_reason(*text);
        throw UsageError(flag + " " + *text + " is not supported by " + std::string(program) +
                         (reason.empty() ? " (" + what_works(f.supported_choices()) + ")" : ": " + reason));
      }
      const auto& supported = f.supported_choices();
      if (std::find(supported.begin(), supported.end(), *text) == supported.end())
        throw UsageError(flag + ": invalid choice '" + *text + "' (choose from " + joined(supported, ", ") + ")");
    }
    // A value the command line gave was checked as it was read; this catches the others.
    if (const auto* i = std::get_if<std::int64_t>(&value)) check_flag_range(flag, static_cast<double>(*i), std::to_string(*i));
    if (const auto* r = std::get_if<double>(&value)) check_flag_range(flag, *r, python_float_repr(*r));
    if (const auto* numbers = std::get_if<std::vector<std::int64_t>>(&value))
      for (std::int64_t i : *numbers) check_flag_range(flag, static_cast<double>(i), std::to_string(i));
  }
}

}  // namespace mgt
