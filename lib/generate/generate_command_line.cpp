#include "generate/generate_command_line.hpp"

#include <map>

#include "core/compute_flags.hpp"
#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/megatron_compatibility.hpp"
#include "generate/generate_flags.hpp"
#include "kernels/backend_factory.hpp"
#include "tokenizer/tokenizer_flags.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-generate";
constexpr int64_t kMaxServerConnections = 400;

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
  GenerateFlagFields defaults;  // --help describes the defaults
  declare_flags(o, generate_flags(defaults));
  o.add_options("generation")("h,help", "Show this help");
  add_version_flag(o, "generation");
  return o;
}

// The program's flags, its refusals, and the Megatron flags every program treats alike.
CommandLineRules command_line_rules() {
  GenerateFlagFields defaults;
  return table_command_line_rules(generate_flags(defaults), kRefusedFlags);
}

// --host and --port serve; with --server, the per-prompt flags have nothing to set.
void check_server_flags(const ServerOptions& s, const FlagValues& given) {
  if (!s.enabled) {
    for (const char* flag : {"host", "port", "server-request-timeout", "server-max-connections"})
      if (given.has(flag)) throw UsageError(std::string("--") + flag + " needs --server");
    return;
  }
  for (const std::string& flag : per_request_flags())
    if (given.has(flag.c_str()))
      throw UsageError("--" + flag +
                       " does not apply with --server: each request gives its own prompts and settings (see "
                       "mgt-generate(1), SERVER)");
  if (s.host.empty()) throw UsageError("--host must not be empty");
  if (s.port < 0 || s.port > 65535) throw UsageError("--port must be in [0, 65535], got " + std::to_string(s.port));
  // Deadlines are kept in milliseconds; a day is far beyond any client worth waiting for.
  if (!(s.request_timeout >= 0.001 && s.request_timeout <= 86400.0))
    throw UsageError("--server-request-timeout must be between 0.001 and 86400 seconds, got " +
                     python_float_repr(s.request_timeout));
  // httplib, built for select(), answers 500 on a socket whose descriptor is 1024 or more: the
  // connections served stay well below, leaving room for the program's other descriptors.
  if (s.max_connections < 1 || s.max_connections > kMaxServerConnections)
    throw UsageError("--server-max-connections must be between 1 and " + std::to_string(kMaxServerConnections) +
                     ", got " + std::to_string(s.max_connections));
}

// What the values of single flags cannot tell, and the fields made of several values.
GenerateOptions to_options(const GenerateFlagFields& fields, const FlagValues& given) {
  GenerateOptions o = fields.options;
  check_device_name(o.device);
  if (o.inference_max_seq_length && *o.inference_max_seq_length < 1)
    throw UsageError("--inference-max-seq-length must be >= 1, got " + std::to_string(*o.inference_max_seq_length));
  o.generation.seed = static_cast<uint64_t>(fields.seed);  // within [0, 2^32): core/flag_ranges.cpp
  TokenizerOptions scratch;
  if (any_flag_given(tokenizer_flags(scratch, TokenizerFlagsRole::kOverridesCheckpoint), given))
    o.tokenizer = fields.tokenizer;
  check_server_flags(o.server, given);
  return o;
}

}  // namespace

GenerateCommandLine parse_generate_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(), kProgram);
  GenerateCommandLine command;
  if (parsed.flags.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  const FlagValues given(parsed.flags);
  check_one_precision_flag(given);
  GenerateFlagFields fields;
  read_flags(generate_flags(fields), given, kProgram);
  command.options = to_options(fields, given);
  return command;
}

std::string generate_help() {
  return make_options().help(generate_flag_groups()) + "\n" + ignored_flags_help(command_line_rules()) +
         "\nCompletions go to standard output (or --output) as JSON lines, diagnostics to standard "
         "error.\nSee man mgt-generate(1).\n";
}

}  // namespace mgt
