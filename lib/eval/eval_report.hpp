// What mgt-eval reports: one JSON object with the metrics, the counts behind them and the
// settings that produced them, and Megatron's own result line (evaluate.py
// evaluate_and_print_results) for people and scripts used to it.
#pragma once
#include <cstdint>
#include <string>

#include "eval/lambada_task.hpp"
#include "eval/wikitext_task.hpp"

namespace mgt {

// What every report names besides the task's numbers.
struct EvalReportContext {
  std::string valid_data;
  std::string checkpoint_directory;
  std::int64_t checkpoint_iteration = 0;
  std::int64_t seq_length = 0;
  std::int64_t micro_batch_size = 0;
  std::string tokenizer_type;  // Megatron's --tokenizer-type value
  std::int64_t vocab_size = 0;
  std::int64_t padded_vocab_size = 0;
};

std::string lambada_report_json(const LambadaResult& result, bool strict, const EvalReportContext& context);
std::string wikitext_report_json(const WikitextResult& result, std::int64_t overlapping_eval,
                                 DetokenizerKind detokenizer, const EvalReportContext& context);

// " validation results on LAMBADA | number correct: 1.2000E+01 | total examples: ... | avg accuracy: ..."
std::string megatron_lambada_line(const LambadaResult& result);
// " validation results on WIKITEXT103 | avg loss: ... | ppl: ... | adjusted ppl: ... | token ratio: ... |"
std::string megatron_wikitext_line(const WikitextResult& result);

// The line between dashes as Megatron prints it: dashes, the line, dashes (len + 1 dashes each).
std::string between_dashes(const std::string& line);

}  // namespace mgt
