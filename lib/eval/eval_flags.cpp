#include "eval/eval_flags.hpp"

#include "ckpt/checkpoint_read_flags.hpp"
#include "ckpt/model_shape_flags.hpp"
#include "core/compute_flags.hpp"
#include "tokenizer/tokenizer_flags.hpp"

namespace mgt {

// Each entry: the flag, its metavar, the field it sets and its description ("(required)" and
// "(default: X)" are added from the entry and the field's default, Megatron's). Ranges of numbers:
// core/flag_ranges.cpp. The flags of tasks/main.py are Megatron's though not its pretraining
// parser's, hence megatron_flag().
// clang-format off
std::vector<FlagDefinition> eval_flags(EvalFlagFields& e) {
  EvalOptions& o = e.options;
  return flag_groups({
    {"task", {
      store("task", "NAME", e.task, "LAMBADA (accuracy) or WIKITEXT103 (perplexity)")
          .required("LAMBADA or WIKITEXT103").choices({"LAMBADA", "WIKITEXT103"}).megatron_flag(),
      store_list("valid-data", "FILE", e.valid_data, "The data file: LAMBADA JSON lines with \"text\", or a WikiText "
                 "token file (its path picks the detokenizer: 'ptb', 'wiki' or 'lambada')")
          .required("the file to evaluate").megatron_flag(),
      store_true("strict-lambada", o.strict_lambada, "LAMBADA: the target is the last word (possibly several tokens), not the last token")
          .megatron_flag(),
      store("overlapping-eval", "N", o.overlapping_eval, "WIKITEXT103: stride of the evaluation windows, 1 to --seq-length")
          .megatron_flag(),
      store("seq-length", "N", o.seq_length, "Tokens per window; longer LAMBADA examples lose the start of their context")
          .default_text("the checkpoint's"),
      store("micro-batch-size", "N", o.micro_batch_size, "Windows or examples per forward pass"),
      device_flag(o.device),
    }},
    {"checkpoint", joined_flags({
      {checkpoint_load_flag(o.load).required("the checkpoint to evaluate")},
      checkpoint_read_flags(o.checkpoint_flags, "mgt-eval"),
    })},
    {kCheckpointTokenizerGroup, tokenizer_flags(e.tokenizer, TokenizerFlagsRole::kOverridesCheckpoint)},
    {kCheckpointModelGroup, checkpoint_model_flags(e.shape, o.model_flags)},
    {"output", {
      store("output", "FILE", o.output, "write the JSON result to FILE (atomically) instead of standard output"),
      store("log-interval", "N", o.log_interval, "Micro-batches between progress lines when stderr is not a terminal"),
    }},
  });
}
// clang-format on

std::vector<std::string> eval_flag_groups() {
  return {"task", "checkpoint", kCheckpointTokenizerGroup, kCheckpointModelGroup, "output"};
}

}  // namespace mgt
