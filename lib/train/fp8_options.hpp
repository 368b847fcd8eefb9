// Megatron's FP8 flags (megatron/training/arguments.py, _add_transformer_engine_args; core_v0.13
// names and defaults) as mgt-train reads them, checked as Megatron's validate_args and
// TransformerConfig check them, and turned into the model's Fp8Recipe.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/compute_flags.hpp"
#include "core/flag_table.hpp"
#include "model/fp8_recipe.hpp"

namespace mgt {

struct Fp8Options {
  std::optional<std::string> format;         // --fp8-format e4m3 | hybrid; unset: no FP8
  std::string recipe = "delayed";            // --fp8-recipe delayed | tensorwise (mxfp8, blockwise refused)
  std::int64_t margin = 0;                   // --fp8-margin
  std::int64_t interval = 1;                 // --fp8-interval: deprecated in Megatron, ignored
  std::int64_t amax_history_len = 1;         // --fp8-amax-history-len
  std::string amax_compute_algo = "most_recent";  // --fp8-amax-compute-algo most_recent | max
  bool wgrad = true;                         // --no-fp8-wgrad clears it
  bool param_gather = false;                 // --fp8-param-gather
  bool norm_casts = true;                    // --no-fp8-norm-casts clears it
  bool first_last_layers_bf16 = false;       // --first-last-layers-bf16
  std::int64_t num_layers_at_start_in_bf16 = 1;  // --num-layers-at-start-in-bf16
  std::int64_t num_layers_at_end_in_bf16 = 1;    // --num-layers-at-end-in-bf16
};

std::vector<FlagDefinition> fp8_flags(Fp8Options& f);

// Megatron's checks between the FP8 flags and the rest: FP8 needs --bf16 or --fp16, the
// parameter gather the distributed optimizer, the bf16 layers fit the model. Throws UsageError;
// notes what is accepted but has no effect.
void validate_fp8_options(const Fp8Options& f, Precision precision, bool distributed_optimizer,
                          std::int64_t num_layers);

// The model's recipe; nullopt without --fp8-format.
std::optional<Fp8Recipe> fp8_recipe(const Fp8Options& f);

}  // namespace mgt
