#include "generate/generate_job.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/signal_flag.hpp"
#include "generate/completion_json.hpp"
#include "generate/generation_model.hpp"
#include "generate/prompt_reader.hpp"

namespace mgt {

namespace {

// Completions go to a file published when complete, or to standard output as they come.
class CompletionSink {
public:
  explicit CompletionSink(const std::string& path) {
    if (!path.empty()) file_ = std::make_unique<AtomicFile>(path);
  }
  void write_line(const std::string& line) {
    if (file_) {
      file_->write(line);
      file_->write("\n");
    } else {
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
    }
  }
  void end_batch() {
    if (!file_) std::fflush(stdout);  // a reader of the pipe sees each batch as it is done
  }
  void commit() {
    if (file_) file_->commit();
  }

private:
  std::unique_ptr<AtomicFile> file_;
};

// `first` is the first micro-batch, read before the model loaded; the rest come from `reader`.
int run_batches(Generator& generator, PromptReader& reader, std::vector<std::string> first,
                const GenerateOptions& options) {
  // SIGINT, SIGTERM (Slurm's scancel) and SIGHUP stop the run after the micro-batch in progress:
  // unwinding removes the --output temporary rather than leave it behind. A second one kills.
  const SignalFlag interrupt({SIGINT, SIGTERM, SIGHUP}, {.leave_ignored = true, .repeat_kills = true});
  CompletionSink sink(options.output);
  Progress progress = Progress::counting_items("prompts", 0, static_cast<uint64_t>(options.log_interval));
  int64_t done = 0;
  int64_t generated = 0;
  int64_t batches = 0;
  double last_rate = 0.0;  // of the last micro-batch: past the first one's start-up costs
  const auto start = std::chrono::steady_clock::now();
  for (bool first_batch = true;; first_batch = false) {
    const std::vector<std::string> prompts =
        first_batch && !first.empty() ? std::move(first) : reader.next_batch(options.micro_batch_size);
    if (prompts.empty()) break;
    const auto batch_start = std::chrono::steady_clock::now();
    std::vector<Completion> completions;
    try {
      completions = generator.generate(prompts, done);
    } catch (const PromptError& e) {
      throw Error(reader.where(e.index) + ": " + e.what());  // the line to fix
    }
    const double batch_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - batch_start).count();
    int64_t batch_tokens = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      sink.write_line(completion_json(done + static_cast<int64_t>(i), prompts[i], completions[i],
                                      options.generation.return_log_probs));
      batch_tokens += static_cast<int64_t>(completions[i].tokens.size());
    }
    generated += batch_tokens;
    ++batches;
    last_rate = batch_seconds > 0 ? static_cast<double>(batch_tokens) / batch_seconds : 0.0;
    sink.end_batch();
    done += static_cast<int64_t>(prompts.size());
    progress.update(static_cast<uint64_t>(done), 0);
    if (interrupt.raised())
      throw Error("interrupted by " + signal_name(interrupt.signal()) + " after " + std::to_string(done) +
                      " prompts; " +
                      (options.output.empty() ? std::string("their completions were written")
                                              : "no output written (" + options.output + " is left as it was)"),
                  signal_exit_code(interrupt.signal()));
  }
  if (done == 0) throw Error((options.prompts.empty() || options.prompts == "-" ? std::string("standard input")
                                                                                 : options.prompts) +
                             " holds no prompts");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sink.commit();
  progress.finish(static_cast<uint64_t>(done), 0);
  char rate[128];
  const double overall = seconds > 0 ? static_cast<double>(generated) / seconds : 0.0;
  if (batches > 1)
    std::snprintf(rate, sizeof rate, " in %.3f s (%.1f tokens/s; the last micro-batch %.1f tokens/s)", seconds,
                  overall, last_rate);
  else
    std::snprintf(rate, sizeof rate, " in %.3f s (%.1f tokens/s)", seconds, overall);
  log::info("generated " + std::to_string(generated) + " tokens for " + std::to_string(done) + " prompts" + rate);
  return kExitOk;
}

// A prompt per line typed at a terminal; the completion is printed after it.
int run_interactive(Generator& generator) {
  std::fprintf(stderr, "Type a prompt and press Enter (Ctrl-D to quit).\n");
  std::string line;
  int64_t index = 0;
  for (;;) {
    std::fprintf(stderr, "prompt> ");
    std::fflush(stderr);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    try {
      const std::vector<std::string> prompts = {line};
      const Completion c = generator.generate(prompts, index++).front();
      std::printf("%s%s\n", line.c_str(), c.text.c_str());
      std::fflush(stdout);
    } catch (const Error& e) {
      std::fprintf(stderr, "mgt-generate: %s\n", e.what());  // a bad prompt does not end the session
    }
  }
  std::fprintf(stderr, "\n");
  return kExitOk;
}

}  // namespace

int run_generate(const GenerateOptions& options) {
  const bool interactive = options.prompts.empty() && options.output.empty() && isatty(STDIN_FILENO);
  // What fails cheaply fails before the checkpoint loads: the output's directory, the prompts
  // file and its first micro-batch (standard input is not waited for), the sampling flags
  // (load_generation_model).
  if (!options.output.empty()) check_atomic_destination(options.output, "--output");
  std::optional<PromptReader> reader;
  std::vector<std::string> first;
  GenerateOptions load = options;
  if (!interactive) {
    reader.emplace(options.prompts.empty() ? "-" : options.prompts);
    // (A --micro-batch-size below 1 is refused by load_generation_model.)
    if (!options.prompts.empty() && options.prompts != "-" && options.micro_batch_size >= 1) {
      first = reader->next_batch(options.micro_batch_size);
      if (first.empty()) throw Error(options.prompts + " holds no prompts");
      // A file of fewer prompts than --micro-batch-size: the memory check counts the rows it has.
      load.micro_batch_size = static_cast<int64_t>(first.size());
    }
  }
  GenerationModel loaded = load_generation_model(load);
  Generator generator(*loaded.model, *loaded.tokenizer, options.generation, loaded.max_sequence_length);
  return interactive ? run_interactive(generator) : run_batches(generator, *reader, std::move(first), options);
}

}  // namespace mgt
