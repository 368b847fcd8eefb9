// The small JSON texts a training checkpoint carries next to its tensors (scheduler state,
// optimizer scalars, the run's arguments), written and read back. Numbers are written as
// Python's repr prints them, which reads back to the same double.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "train/lr_schedule.hpp"

namespace mgt {

// Megatron's OptimizerParamScheduler.state_dict() keys.
std::string scheduler_state_json(const LrSchedulerState& state);
// Throws mgt::Error naming `what` and the missing or mistyped key.
LrSchedulerState parse_scheduler_state_json(const std::string& text, const std::string& what);

// The scalar members of one flat JSON object; nested values are skipped. Throws mgt::Error
// naming `what` when the text is not a JSON object.
class JsonScalars {
public:
  using Value = std::variant<std::monostate, bool, std::int64_t, double, std::string>;  // monostate: null

  JsonScalars(const std::string& text, const std::string& what);

  bool contains(const std::string& key) const { return values_.count(key) > 0; }
  // A human-readable rendering of a value ("null", "64", "0.1", "LayerNorm"); "" when absent.
  std::string show(const std::string& key) const;
  // Throw mgt::Error naming `what` and the key when absent or of another type (an integer
  // reads as a double too).
  std::int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  std::string text(const std::string& key) const;

private:
  const Value& at(const std::string& key) const;
  std::string what_;
  std::map<std::string, Value> values_;
};

}  // namespace mgt
