// mgt-generate's work: open the checkpoint, build the model and tokenizer, then complete the
// prompts of a JSON-lines file (or standard input) batch by batch into completions as JSON
// lines, or, when standard input is a terminal and no prompt file is named, answer prompts
// typed one per line.
#pragma once
#include "ckpt/checkpoint_read_flags.hpp"
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "generate/generator.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// --server: Megatron's text-generation REST API instead of prompt files.
struct ServerOptions {
  bool enabled = false;            // --server
  std::string host = "127.0.0.1";  // --host: loopback unless told otherwise
  int64_t port = 5000;             // --port (Megatron's default); 0: any free port
  // --server-request-timeout: seconds a client has to send one request, headers and body.
  double request_timeout = 30.0;
  int64_t max_connections = 128;  // --server-max-connections: served at once, one thread each
};

struct GenerateOptions {
  std::string load;                                // --load
  std::optional<TokenizerOptions> tokenizer;       // tokenizer flags, if any were given
  std::map<std::string, std::string> model_flags;  // model-shape flags given (must agree)
  std::string prompts;                             // --prompts: file or "-"; empty: standard input
  std::string output;                              // --output: file; empty: standard output
  int64_t micro_batch_size = 8;                    // prompts completed together
  // The longest prompt plus completion, in tokens: --seq-length (at most the checkpoint's
  // max_position_embeddings, as Megatron's validate_args requires), and Megatron Core's
  // --inference-max-seq-length; none: the checkpoint's max_position_embeddings.
  std::optional<int64_t> seq_length;
  std::optional<int64_t> inference_max_seq_length;
  std::string device = "auto";                     // --device (kernels/backend_factory.hpp)
  CheckpointReadFlags checkpoint_flags;            // --make-vocab-size-divisible-by, --bf16, …
  GenerationSettings generation;
  int64_t log_interval = 0;  // progress lines every N prompts when not on a terminal; 0: every batch
  ServerOptions server;
};

// Returns the exit code; throws mgt::Error on failure (no output file is left then).
int run_generate(const GenerateOptions& options);

}  // namespace mgt
