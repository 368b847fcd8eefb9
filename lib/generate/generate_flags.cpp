#include "generate/generate_flags.hpp"

#include "ckpt/checkpoint_read_flags.hpp"
#include "ckpt/model_shape_flags.hpp"
#include "core/compute_flags.hpp"
#include "tokenizer/tokenizer_flags.hpp"

namespace mgt {

// Each entry: the flag, its metavar, the field it sets and its description ("(required)" and
// "(default: X)" are added from the entry and the field's default, Megatron's). Ranges of numbers:
// core/flag_ranges.cpp. The flags of tools/run_text_generation_server.py are Megatron's though not
// its pretraining parser's, hence megatron_flag(). An alias sets the same field as its flag; given
// both, the later entry wins.
// clang-format off
std::vector<FlagDefinition> generate_flags(GenerateFlagFields& e) {
  GenerateOptions& o = e.options;
  ServerOptions& s = o.server;
  GenerationSettings& g = o.generation;
  SamplingParams& p = g.sampling;
  return flag_groups({
    {"input and output", {
      checkpoint_load_flag(o.load).required("the checkpoint to generate with"),
      store("prompts", "FILE", o.prompts, "JSON lines with a \"prompt\" field, or - for standard input")
          .default_text("standard input, typed prompts when it is a terminal").megatron_flag(),
      store("output", "FILE", o.output, "completions as JSON lines").default_text("standard output"),
      store("micro-batch-size", "N", o.micro_batch_size, "Prompts completed together"),
      device_flag(o.device),
      store("log-interval", "N", o.log_interval, "Progress line every N prompts when standard error is not a terminal"),
    }},
    {"server", {
      store_true("server", s.enabled, "serve Megatron's text-generation REST API (PUT /api) instead of reading prompts"),
      store("host", "ADDR", s.host, "address the server listens on"),
      store("port", "N", s.port, "Port the server listens on (0: any free port, printed at start)").megatron_flag(),
      store("server-request-timeout", "SECONDS", s.request_timeout,
            "seconds a client has to send one request, headers and body; a slower one is answered 408 and "
            "disconnected"),
      store("server-max-connections", "N", s.max_connections,
            "connections served at once (1 to 400), one thread each; further ones wait to be accepted"),
    }},
    {"generation", {
      store("max-new-tokens", "N", g.max_new_tokens, "tokens to generate per prompt (Megatron's tokens_to_generate)"),
      store("num-tokens-to-generate", "N", g.max_new_tokens, "Same as --max-new-tokens").megatron_flag(),
      store("temperature", "T", p.temperature, "Divide the logits by T before sampling").megatron_flag(),
      store("top-k", "K", p.top_k, "sample among the K most likely tokens (1: greedy; 0: no limit)"),
      store("top-p", "P", p.top_p, "sample from the smallest set of tokens with probability >= P (needs --top-k 0)"),
      store("top-p-decay", "F", p.top_p_decay, "multiply top-p by this after each token"),
      store("top-p-bound", "F", p.top_p_bound, "lower bound of the decaying top-p"),
      store("top_k", "K", p.top_k, "Same as --top-k (tools/run_text_generation_server.py's spelling)").megatron_flag(),
      store("top_p", "P", p.top_p, "Same as --top-p (tools/run_text_generation_server.py's spelling)").megatron_flag(),
      store("seq-length", "N", o.seq_length, "Longest prompt plus completion, in tokens: a completion that reaches it "
            "ends (finish_reason length); at most the checkpoint's max_position_embeddings")
          .default_text("the checkpoint's max_position_embeddings"),
      store("inference-max-seq-length", "N", o.inference_max_seq_length,
            "Megatron Core's bound on prompt plus completion; with --seq-length the smaller one holds"),
      store("seed", "N", e.seed, "Random seed; the same seed gives the same completions"),
      custom_flag("stop", FlagArity::ManyAppending, "TEXT...", "stop a completion at this text (not included; repeatable)",
                  [&g](const std::vector<std::string>& values) {
                    // An empty text would match everywhere and nowhere: refused rather than ignored.
                    for (const std::string& v : values)
                      if (v.empty()) throw UsageError("--stop: an empty text stops nothing; give the text to stop at");
                    g.stop_strings = values;
                  },
                  [&g] { return ArgValue(g.stop_strings); }),
      store_true("stop-on-eol", g.stop_on_eol, "stop a completion at its first newline"),
      store_true("stop-on-double-eol", g.stop_on_double_eol, "stop a completion at its first blank line"),
      store_true("add-bos", g.add_bos, "start every prompt with the end-of-document token (Megatron's add_BOS)"),
      store_true("return-log-probs", g.return_log_probs, "Add the log-probability of each generated token").megatron_flag(),
    }},
    {"checkpoint", checkpoint_read_flags(o.checkpoint_flags, "mgt-generate")},
    {kCheckpointTokenizerGroup, tokenizer_flags(e.tokenizer, TokenizerFlagsRole::kOverridesCheckpoint)},
    {kCheckpointModelGroup, checkpoint_model_flags(e.shape, o.model_flags)},
  });
}
// clang-format on

std::vector<std::string> generate_flag_groups() {
  return {"input and output", "server", "generation", "checkpoint", kCheckpointTokenizerGroup, kCheckpointModelGroup};
}

std::vector<std::string> per_request_flags() {
  return {"prompts",     "output", "max-new-tokens", "num-tokens-to-generate", "temperature",
          "top-k",       "top-p",  "top_k",          "top_p",                  "top-p-decay",
          "top-p-bound", "stop",   "stop-on-eol",    "stop-on-double-eol",     "add-bos",
          "return-log-probs"};
}

}  // namespace mgt
