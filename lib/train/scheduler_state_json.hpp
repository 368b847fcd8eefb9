// The learning-rate scheduler's state as the JSON text a training checkpoint carries next to its
// tensors, written and read back. Numbers are written as Python's repr prints them, which reads
// back to the same double.
#pragma once
#include <string>

#include "train/lr_schedule.hpp"

namespace mgt {

// Megatron's OptimizerParamScheduler.state_dict() keys.
std::string scheduler_state_json(const LrSchedulerState& state);
// Throws mgt::Error naming `what` and the missing or mistyped key.
LrSchedulerState parse_scheduler_state_json(const std::string& text, const std::string& what);

}  // namespace mgt
