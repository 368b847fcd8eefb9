// The values a numeric flag may take, one table for every program: a flag keeps Megatron's meaning
// wherever it appears, so its range is a property of its name. parse_integer_flag and
// parse_real_flag (core/command_line.hpp) check every value they read against it, so that a
// value out of range is refused naming the flag that carries it, before any cross-flag check can
// blame another flag. Programs still check what depends on other flags or on their own job.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

struct FlagRange {
  double min;  // -infinity: no lower bound
  double max;  // +infinity: no upper bound
  bool min_inclusive = true;
  bool max_inclusive = true;
  bool integer = false;  // says "between A and B" rather than "in [A, B]"

  bool contains(double value) const;
  // "at least 1", "between 0 and 1000000", "in [0, 1)", "greater than 0", ...
  std::string describe() const;
};

// The flags the table has, in its (sorted) order.
std::vector<std::string_view> flags_with_known_ranges();

// The range of `flag` ("--lr"), if the table has it.
std::optional<FlagRange> known_flag_range(std::string_view flag);

// Throws mgt::UsageError "FLAG must be RANGE, got TEXT" when `value` (read from `text`) is outside
// the flag's known range; does nothing for a flag the table does not have.
void check_flag_range(std::string_view flag, double value, std::string_view text);

}  // namespace mgt
