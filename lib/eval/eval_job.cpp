#include "eval/eval_job.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "ckpt/model_checkpoint.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "eval/eval_report.hpp"
#include "eval/lambada_task.hpp"
#include "eval/lm_windows.hpp"
#include "eval/model_scorer.hpp"
#include "eval/wikitext_task.hpp"
#include "kernels/backend_factory.hpp"
#include "model/memory_estimate.hpp"

namespace mgt {

namespace {

void say(const std::string& text) {
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

// The --tokenizer-type value the run used: given, or recorded in the checkpoint.
std::string tokenizer_type(const ModelCheckpoint& checkpoint, const EvalOptions& options) {
  if (options.tokenizer && !options.tokenizer->type.empty()) return options.tokenizer->type;
  const JsonScalars t(checkpoint.metadata.tokenizer_json, "the tokenizer of checkpoint " + checkpoint.directory);
  return t.contains("tokenizer_type") ? t.text("tokenizer_type") : "";
}

std::int64_t checked_seq_length(const ModelCheckpoint& checkpoint, const EvalOptions& options) {
  const GptConfig& c = checkpoint.config;
  const std::int64_t seq = options.seq_length.value_or(c.seq_length);
  if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute && seq > c.max_position_embeddings)
    throw UsageError("--seq-length " + std::to_string(seq) + " exceeds the checkpoint's --max-position-embeddings " +
                     std::to_string(c.max_position_embeddings) + " (learned absolute positions)");
  if (options.task == ZeroShotTask::kWikitext103 && options.overlapping_eval > seq)
    throw UsageError("--overlapping-eval " + std::to_string(options.overlapping_eval) + " exceeds --seq-length " +
                     std::to_string(seq) + ": the windows would leave tokens unscored");
  return seq;
}

// Progress over `total` rows, lines every log_interval micro-batches when not on a terminal.
struct RowProgress {
  Progress progress;
  RowProgress(const char* rows, std::int64_t total, const EvalOptions& o)
      : progress(Progress::counting_items(rows, static_cast<std::uint64_t>(total),
                                          static_cast<std::uint64_t>(o.log_interval * o.micro_batch_size))) {}
  void operator()(std::int64_t done) { progress.update(static_cast<std::uint64_t>(done), 0); }
};

}  // namespace

std::string_view to_string(ZeroShotTask task) {
  return task == ZeroShotTask::kLambada ? "LAMBADA" : "WIKITEXT103";
}

int run_eval(const EvalOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.output) check_atomic_destination(*options.output, "--output");
  const ModelCheckpoint checkpoint = open_model_checkpoint(options.load, options.checkpoint_flags.ckpt_step);
  check_model_flags_agree(checkpoint, options.model_flags);
  const std::unique_ptr<Tokenizer> tokenizer = make_checkpoint_tokenizer(checkpoint, options.tokenizer, "mgt-eval");
  check_padded_vocab(checkpoint, *tokenizer, options.checkpoint_flags);
  const std::int64_t seq_length = checked_seq_length(checkpoint, options);
  // mgt-eval has no --profile: the backend's defaults.
  const BackendOptions backend_options;
  const std::unique_ptr<Backend> backend_owner = make_backend(options.device, backend_options);
  Backend& backend = *backend_owner;
  apply_precision_flag(backend, options.checkpoint_flags);
  say("> compute device: " + backend.description() + "\n");
  // After the data, before the weights: a model that cannot fit is refused with the numbers. A
  // micro-batch holds no more rows than the data has.
  const auto check_model_fits = [&](std::int64_t rows) {
    MemoryEstimateRequest memory;
    memory.use = MemoryUse::kEvaluation;
    memory.seq_length = seq_length;
    memory.micro_batch_size = std::max<std::int64_t>(1, std::min(options.micro_batch_size, rows));
    inference_weight_bytes(checkpoint.config, backend, memory);
    check_memory(checkpoint.config, memory, memory_available_to(backend), "evaluating checkpoint " + checkpoint.directory);
  };
  if (options.task == ZeroShotTask::kWikitext103 && options.strict_lambada)
    log::warn("--strict-lambada has no effect on WIKITEXT103");

  EvalReportContext context;
  context.valid_data = options.valid_data;
  context.checkpoint_directory = checkpoint.directory;
  context.checkpoint_iteration = checkpoint.metadata.iteration;
  context.seq_length = seq_length;
  context.micro_batch_size = options.micro_batch_size;
  context.tokenizer_type = tokenizer_type(checkpoint, options);
  context.vocab_size = tokenizer->vocab_size();
  context.padded_vocab_size = checkpoint.config.padded_vocab_size;

  // The data is read before the weights: a bad file fails in seconds, not after the model loads.
  std::string json;
  std::string summary;
  double loss = 0.0;  // the average loss the result rests on
  if (options.task == ZeroShotTask::kLambada) {
    say("> building lambada dataset from " + options.valid_data + " ...\n");
    const std::vector<LambadaExample> examples =
        read_lambada_examples(options.valid_data, *tokenizer, options.strict_lambada);
    say(" > found " + std::to_string(examples.size()) + " samples.\n");
    check_model_fits(static_cast<std::int64_t>(examples.size()));
    const std::unique_ptr<GptModel> model = load_checkpoint_model(checkpoint, backend);
    GptModelScorer scorer(*model);
    RowProgress progress("examples", static_cast<std::int64_t>(examples.size()), options);
    const LambadaSettings settings{seq_length, options.micro_batch_size, tokenizer->eod(), options.valid_data};
    const LambadaResult result = evaluate_lambada(examples, scorer, settings, std::ref(progress));
    progress.progress.finish(static_cast<std::uint64_t>(result.examples), 0);
    loss = result.target_avg_loss();
    json = lambada_report_json(result, options.strict_lambada, context);
    summary = between_dashes(megatron_lambada_line(result));
    char buf[256];
    std::snprintf(buf, sizeof buf, "LAMBADA%s: accuracy %.4f (%lld of %lld); target perplexity %.4f over %lld tokens\n",
                  options.strict_lambada ? " (strict)" : "", result.accuracy(),
                  static_cast<long long>(result.correct), static_cast<long long>(result.examples),
                  result.target_perplexity(), static_cast<long long>(result.target_tokens));
    summary += buf;
    if (result.truncated > 0)
      summary += std::to_string(result.truncated) + " examples were longer than " + std::to_string(seq_length + 1) +
                 " tokens and kept only their last " + std::to_string(seq_length + 1) + "\n";
  } else {
    const WikitextData data = read_wikitext(options.valid_data, *tokenizer);
    say(" > number of original tokens: " + std::to_string(data.original_tokens) +
        ", number of detokenized tokens: " + std::to_string(data.tokens.size()) + "\n");
    const std::int64_t windows = lm_window_count(static_cast<std::int64_t>(data.tokens.size()), options.overlapping_eval);
    check_model_fits(windows);
    const std::unique_ptr<GptModel> model = load_checkpoint_model(checkpoint, backend);
    GptModelScorer scorer(*model);
    const WikitextSettings settings{seq_length, options.overlapping_eval, options.micro_batch_size, tokenizer->eod()};
    say(" > " + std::to_string(windows) + " windows of " + std::to_string(seq_length) + " tokens, stride " +
        std::to_string(options.overlapping_eval) + " (detokenizer: " + std::string(to_string(data.detokenizer)) + ")\n");
    RowProgress progress("windows", windows, options);
    const WikitextResult result = evaluate_wikitext(data, scorer, settings, std::ref(progress));
    progress.progress.finish(static_cast<std::uint64_t>(result.windows), 0);
    loss = result.avg_loss();
    json = wikitext_report_json(result, options.overlapping_eval, data.detokenizer, context);
    summary = between_dashes(megatron_wikitext_line(result));
  }

  if (options.output) write_file_atomically(*options.output, json);
  else std::fputs(json.c_str(), stdout);
  std::fflush(stdout);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say(summary + "checkpoint " + checkpoint.directory + " (iteration " + std::to_string(checkpoint.metadata.iteration) +
      "), evaluated in " + format_duration(seconds) + (options.output ? ", result in " + *options.output : "") +
      "\ndone :-)\n");
  // The result (its figures null, with the reason) is written for scripts that read it; the exit
  // status says that it is no measurement.
  if (!std::isfinite(loss))
    throw Error("checkpoint " + checkpoint.directory + " scores a loss of " + (std::isnan(loss) ? "NaN" : "infinity") +
                ": its weights overflow (the run that saved it diverged)");
  return kExitOk;
}

}  // namespace mgt
