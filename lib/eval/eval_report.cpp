#include "eval/eval_report.hpp"

#include <cmath>
#include <cstdio>

#include "core/json_text.hpp"
#include "data/python_json.hpp"

namespace mgt {

namespace {

// Python's '{:.4E}'.format(x).
std::string format_4e(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4E", x);
  return buf;
}

PyValue checkpoint_value(const EvalReportContext& c) {
  PyValue v = PyValue::dict();
  v.set("directory", PyValue::string(c.checkpoint_directory));
  v.set("iteration", PyValue::integer(c.checkpoint_iteration));
  return v;
}

PyValue tokenizer_value(const EvalReportContext& c) {
  PyValue v = PyValue::dict();
  v.set("type", PyValue::string(c.tokenizer_type));
  v.set("vocab_size", PyValue::integer(c.vocab_size));
  v.set("padded_vocab_size", PyValue::integer(c.padded_vocab_size));
  return v;
}

// The metrics of a report. Strict JSON has no NaN or Infinity: such a metric is written as null,
// and "null_reasons" maps its name to the reason.
class Metrics {
public:
  void add(const char* name, double value) {
    if (std::isfinite(value)) {
      values_.push_back({name, PyValue::real(value)});
      return;
    }
    values_.push_back({name, PyValue::none()});
    reasons_.push_back({name, PyValue::string(std::isnan(value)
                                                  ? "not a number: the model's losses include NaN"
                                                  : "infinite: the loss is too large for its exponential")});
  }
  void write_into(PyValue& report) {
    for (auto& [name, value] : values_) report.set(name, std::move(value));
    if (!reasons_.empty()) report.set("null_reasons", PyValue::dict(std::move(reasons_)));
  }

private:
  PyValue::Dict values_;
  PyValue::Dict reasons_;
};

PyValue common_settings(const EvalReportContext& c) {
  PyValue v = PyValue::dict();
  v.set("seq_length", PyValue::integer(c.seq_length));
  v.set("micro_batch_size", PyValue::integer(c.micro_batch_size));
  return v;
}

}  // namespace

std::string lambada_report_json(const LambadaResult& r, bool strict, const EvalReportContext& c) {
  PyValue counts = PyValue::dict();
  counts.set("examples", PyValue::integer(r.examples));
  counts.set("correct", PyValue::integer(r.correct));
  counts.set("truncated", PyValue::integer(r.truncated));
  counts.set("target_tokens", PyValue::integer(r.target_tokens));
  PyValue settings = common_settings(c);
  settings.set("strict_lambada", PyValue::boolean(strict));
  settings.set("tokenizer", tokenizer_value(c));

  PyValue v = PyValue::dict();
  v.set("task", PyValue::string("LAMBADA"));
  v.set("valid_data", PyValue::string(c.valid_data));
  Metrics metrics;
  metrics.add("accuracy", r.accuracy());
  metrics.add("target_avg_loss", r.target_avg_loss());
  metrics.add("target_ppl", r.target_perplexity());
  metrics.write_into(v);
  v.set("counts", std::move(counts));
  v.set("checkpoint", checkpoint_value(c));
  v.set("settings", std::move(settings));
  return v.dumps() + "\n";
}

std::string wikitext_report_json(const WikitextResult& r, std::int64_t overlapping_eval, DetokenizerKind detokenizer,
                                 const EvalReportContext& c) {
  PyValue counts = PyValue::dict();
  counts.set("original_tokens", PyValue::integer(r.original_tokens));
  counts.set("detokenized_tokens", PyValue::integer(r.detokenized_tokens));
  counts.set("windows", PyValue::integer(r.windows));
  counts.set("scored_targets", PyValue::integer(r.scored_targets));
  PyValue settings = common_settings(c);
  settings.set("overlapping_eval", PyValue::integer(overlapping_eval));
  settings.set("detokenizer", PyValue::string(std::string(to_string(detokenizer))));
  settings.set("tokenizer", tokenizer_value(c));

  PyValue v = PyValue::dict();
  v.set("task", PyValue::string("WIKITEXT103"));
  v.set("valid_data", PyValue::string(c.valid_data));
  Metrics metrics;
  metrics.add("avg_loss", r.avg_loss());
  metrics.add("ppl", r.ppl());
  metrics.add("adjusted_ppl", r.adjusted_ppl());
  metrics.add("token_ratio", r.token_ratio());
  metrics.write_into(v);
  v.set("counts", std::move(counts));
  v.set("checkpoint", checkpoint_value(c));
  v.set("settings", std::move(settings));
  return v.dumps() + "\n";
}

std::string megatron_lambada_line(const LambadaResult& r) {
  return " validation results on LAMBADA | number correct: " + format_4e(static_cast<double>(r.correct)) +
         " | total examples: " + format_4e(static_cast<double>(r.examples)) +
         " | avg accuracy: " + format_4e(r.accuracy());
}

std::string megatron_wikitext_line(const WikitextResult& r) {
  return " validation results on WIKITEXT103 | avg loss: " + format_4e(r.avg_loss()) +
         " | ppl: " + format_4e(r.ppl()) + " | adjusted ppl: " + format_4e(r.adjusted_ppl()) +
         " | token ratio: " + python_float_repr(r.token_ratio()) + " |";
}

std::string between_dashes(const std::string& line) {
  const std::string dashes(line.size() + 1, '-');
  return dashes + "\n" + line + "\n" + dashes + "\n";
}

}  // namespace mgt
