// mgt-eval's work: Megatron's zero-shot evaluation (tasks/main.py --task LAMBADA|WIKITEXT103)
// of a checkpoint: open it, build its tokenizer, read the task's data, run the model over it in
// micro-batches and report Megatron's metrics as one JSON object and a human summary.
#pragma once
#include "ckpt/checkpoint_read_flags.hpp"
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

enum class ZeroShotTask { kLambada, kWikitext103 };

// "LAMBADA" | "WIKITEXT103", Megatron's --task values.
std::string_view to_string(ZeroShotTask task);

struct EvalOptions {
  ZeroShotTask task = ZeroShotTask::kLambada;  // --task
  std::string valid_data;                      // --valid-data (exactly one file, as Megatron asserts)
  bool strict_lambada = false;                 // --strict-lambada
  std::int64_t overlapping_eval = 32;          // --overlapping-eval (WIKITEXT103)
  std::string load;                            // --load
  std::int64_t micro_batch_size = 8;           // --micro-batch-size
  std::string device = "auto";                 // --device (kernels/backend_factory.hpp)
  std::optional<std::int64_t> seq_length;      // --seq-length; default: the checkpoint's
  std::optional<TokenizerOptions> tokenizer;   // tokenizer flags, when any was given
  std::int64_t log_interval = 100;             // --log-interval, in micro-batches
  std::map<std::string, std::string> model_flags;  // model-shape flags given, must agree
  std::optional<std::string> output;           // --output FILE; standard output otherwise
  CheckpointReadFlags checkpoint_flags;  // --make-vocab-size-divisible-by, --bf16, …
};

// Runs the evaluation; returns the exit code. Throws mgt::Error (usage errors with exit code 2).
int run_eval(const EvalOptions& options);

}  // namespace mgt
