// mgt-eval's flags, each defined once (core/flag_table.hpp): parsing, --help and the per-flag
// checks read this table. Those of tasks/main.py for the zero-shot GPT tasks are mgt-eval's own
// entries; the checkpoint, tokenizer, model-shape and compute flags are the definitions every
// program that takes them shares. --help and --version are not in it.
#pragma once
#include <string>
#include <vector>

#include "core/flag_table.hpp"
#include "eval/eval_job.hpp"
#include "model/model_shape_options.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// What the flags set: EvalOptions, and the values that become its fields only once the command
// line is read whole (the task's name, the --valid-data list, the tokenizer flags when any is
// given, the model-shape flags as numbers).
struct EvalFlagFields {
  EvalOptions options;
  std::string task;
  std::vector<std::string> valid_data;
  TokenizerOptions tokenizer;
  ModelShapeOptions shape;
};

// The table bound to `fields`, which must outlive it: over default fields it describes the
// defaults, over parsed ones it holds the run's values.
std::vector<FlagDefinition> eval_flags(EvalFlagFields& fields);

// The --help groups, in the order a user needs them.
std::vector<std::string> eval_flag_groups();

}  // namespace mgt
