#include "generate/generate_command_line.hpp"

#include <map>

#include "ckpt/checkpoint_read_flags.hpp"
#include "ckpt/model_shape_flags.hpp"
#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "kernels/backend_factory.hpp"
#include "tokenizer/tokenizer_flags.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-generate";

const std::map<std::string, FlagArity> kListFlags = {{"--stop", FlagArity::ManyAppending}};

const std::map<std::string, std::string> kRefusedFlags = {
    {"--beam-width", "beam search is not supported"},
    // Older Megatron's tools/generate_samples_gpt.py (examples/generate_text.sh).
    {"--out-seq-length", "it is older Megatron's tokens to generate; give --max-new-tokens (Megatron's "
                         "--num-tokens-to-generate), and --seq-length to bound prompt plus completion"},
    {"--genfile", "unconditional samples are not generated; give prompts (--prompts) and --output"},
    {"--num-samples", "unconditional samples are not generated; give prompts (--prompts), one per completion"},
};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Complete prompts with a GPT checkpoint (greedy or sampled, key/value-cached), "
                     "as Megatron-LM's text generation does.");
  o.custom_help("--load DIR [--prompts FILE] [--output FILE] [options]");
  // clang-format off
  o.add_options("input and output")
      ("load", "Checkpoint: a --save directory (latest iteration) or an iteration directory (required)",
       cxxopts::value<std::string>(), "DIR")
      ("prompts", "JSON lines with a \"prompt\" field, or - for standard input (default: standard "
                  "input, typed prompts when it is a terminal)", cxxopts::value<std::string>(), "FILE")
      ("output", "mgt: completions as JSON lines (default: standard output)", cxxopts::value<std::string>(), "FILE")
      ("micro-batch-size", "Prompts completed together", cxxopts::value<std::string>()->default_value("8"), "N")
      ("device", "mgt: compute device: auto (a GPU when one is visible), cpu, cuda or cuda:N", cxxopts::value<std::string>()->default_value("auto"), "D")
      ("log-interval", "Progress line every N prompts when standard error is not a terminal",
       cxxopts::value<std::string>()->default_value("100"), "N");
  o.add_options("server")
      ("server", "mgt: serve Megatron's text-generation REST API (PUT /api) instead of reading prompts")
      ("host", "mgt: address the server listens on", cxxopts::value<std::string>()->default_value("127.0.0.1"), "ADDR")
      ("port", "Port the server listens on (0: any free port, printed at start)",
       cxxopts::value<std::string>()->default_value("5000"), "N");
  o.add_options("generation")
      ("max-new-tokens", "mgt: tokens to generate per prompt (Megatron's tokens_to_generate)",
       cxxopts::value<std::string>()->default_value("30"), "N")
      ("num-tokens-to-generate", "Same as --max-new-tokens", cxxopts::value<std::string>(), "N")
      ("temperature", "Divide the logits by T before sampling", cxxopts::value<std::string>()->default_value("1.0"), "T")
      ("top-k", "mgt: sample among the K most likely tokens (1: greedy; 0: no limit)",
       cxxopts::value<std::string>()->default_value("1"), "K")
      ("top-p", "mgt: sample from the smallest set of tokens with probability >= P (needs --top-k 0)",
       cxxopts::value<std::string>()->default_value("0.0"), "P")
      ("top-p-decay", "mgt: multiply top-p by this after each token", cxxopts::value<std::string>()->default_value("0.0"), "F")
      ("top-p-bound", "mgt: lower bound of the decaying top-p", cxxopts::value<std::string>()->default_value("0.0"), "F")
      ("top_k", "Same as --top-k (tools/run_text_generation_server.py's spelling)", cxxopts::value<std::string>(), "K")
      ("top_p", "Same as --top-p (tools/run_text_generation_server.py's spelling)", cxxopts::value<std::string>(), "P")
      ("seq-length", "Longest prompt plus completion, in tokens: a completion that reaches it ends "
                     "(finish_reason length); at most the checkpoint's max_position_embeddings "
                     "(default: the checkpoint's max_position_embeddings)", cxxopts::value<std::string>(), "N")
      ("inference-max-seq-length", "Megatron Core's bound on prompt plus completion; with --seq-length "
                                   "the smaller one holds", cxxopts::value<std::string>(), "N")
      ("seed", "Random seed; the same seed gives the same completions",
       cxxopts::value<std::string>()->default_value("1234"), "N")
      ("stop", "mgt: stop a completion at this text (not included; repeatable)",
       cxxopts::value<std::vector<std::string>>(), "TEXT...")
      ("stop-on-eol", "mgt: stop a completion at its first newline")
      ("stop-on-double-eol", "mgt: stop a completion at its first blank line")
      ("add-bos", "mgt: start every prompt with the end-of-document token (Megatron's add_BOS)")
      ("return-log-probs", "Add the log-probability of each generated token")
      ("h,help", "Show this help");
  // clang-format on
  add_version_flag(o, "generation");
  add_checkpoint_read_flags(o);
  add_tokenizer_flags(o);
  add_model_shape_flags(o);
  return o;
}

// Flags that mean something only for prompt files: a request carries its own settings.
constexpr const char* kPerRequestFlags[] = {
    "prompts", "output", "max-new-tokens", "num-tokens-to-generate", "temperature", "top-k", "top-p", "top_k", "top_p",
    "top-p-decay", "top-p-bound", "stop", "stop-on-eol", "stop-on-double-eol", "add-bos", "return-log-probs"};

void set_server_options(const FlagValues& f, GenerateOptions& o) {
  ServerOptions& s = o.server;
  f.set("server", s.enabled);
  if (!s.enabled) {
    for (const char* flag : {"host", "port"})
      if (f.has(flag)) throw UsageError(std::string("--") + flag + " needs --server");
    return;
  }
  for (const char* flag : kPerRequestFlags)
    if (f.has(flag))
      throw UsageError(std::string("--") + flag +
                       " does not apply with --server: each request gives its own prompts and settings (see "
                       "mgt-generate(1), SERVER)");
  s.host = f.text("host");
  if (s.host.empty()) throw UsageError("--host must not be empty");
  s.port = f.integer("port");
  if (s.port < 0 || s.port > 65535) throw UsageError("--port must be in [0, 65535], got " + std::to_string(s.port));
}

std::int64_t sequence_length(const FlagValues& f, const char* flag) {
  const std::int64_t n = f.integer(flag);
  if (n < 1) throw UsageError(std::string("--") + flag + " must be >= 1, got " + std::to_string(n));
  return n;
}

GenerateOptions to_options(const cxxopts::ParseResult& result) {
  const FlagValues f(result);
  GenerateOptions o;
  f.set("load", o.load);
  if (o.load.empty()) throw UsageError("--load is required: the checkpoint to generate with");
  f.set("prompts", o.prompts);
  f.set("output", o.output);
  o.micro_batch_size = f.integer("micro-batch-size");
  o.device = f.text("device");
  check_device_name(o.device);
  o.log_interval = f.integer("log-interval");
  if (f.has("seq-length")) o.seq_length = sequence_length(f, "seq-length");
  if (f.has("inference-max-seq-length")) o.inference_max_seq_length = sequence_length(f, "inference-max-seq-length");
  GenerationSettings& g = o.generation;
  g.max_new_tokens = f.integer(f.has("num-tokens-to-generate") ? "num-tokens-to-generate" : "max-new-tokens");
  g.sampling.temperature = f.real("temperature");
  g.sampling.top_k = f.integer(f.has("top_k") ? "top_k" : "top-k");
  g.sampling.top_p = f.real(f.has("top_p") ? "top_p" : "top-p");
  g.sampling.top_p_decay = f.real("top-p-decay");
  g.sampling.top_p_bound = f.real("top-p-bound");
  const std::int64_t seed = f.integer("seed");
  if (seed < 0) throw UsageError("--seed must be >= 0, got " + std::to_string(seed));
  g.seed = static_cast<uint64_t>(seed);
  f.set("stop", g.stop_strings);
  f.set("stop-on-eol", g.stop_on_eol);
  f.set("stop-on-double-eol", g.stop_on_double_eol);
  f.set("add-bos", g.add_bos);
  f.set("return-log-probs", g.return_log_probs);
  o.tokenizer = given_tokenizer_flags(f);
  set_server_options(f, o);
  o.model_flags = given_model_shape_flags(result);
  o.checkpoint_flags = read_checkpoint_read_flags(f, kProgram);
  return o;
}

// The program's flags, its refusals, and the Megatron flags every program treats alike.
CommandLineRules command_line_rules(const cxxopts::Options& options) {
  std::map<std::string, FlagArity> lists = kListFlags;
  lists.insert(tokenizer_model_list_flags().begin(), tokenizer_model_list_flags().end());
  CommandLineRules rules{declared_flags(options, lists), kRefusedFlags, true};
  add_megatron_compatibility_flags(rules);
  return rules;
}

}  // namespace

GenerateCommandLine parse_generate_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(options), kProgram);
  const cxxopts::ParseResult& result = parsed.flags;
  GenerateCommandLine command;
  if (result.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  command.options = to_options(result);
  return command;
}

std::string generate_help() {
  const cxxopts::Options options = make_options();
  return options.help() + "\n" + ignored_flags_help(command_line_rules(options)) +
         "\nCompletions go to standard output (or --output) as JSON lines, diagnostics to standard "
         "error.\nSee man mgt-generate(1).\n";
}

}  // namespace mgt
