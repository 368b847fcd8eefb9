#include "generate/generation_model.hpp"

#include <algorithm>

#include "ckpt/model_checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "generate/generator.hpp"
#include "kernels/backend_factory.hpp"
#include "model/memory_estimate.hpp"

namespace mgt {

int64_t generation_length_limit(const GenerateOptions& options, int64_t max_position_embeddings) {
  int64_t limit = max_position_embeddings;
  if (options.seq_length) {
    // Megatron's validate_args asserts max_position_embeddings >= seq_length at start-up.
    if (*options.seq_length > max_position_embeddings)
      throw UsageError("--seq-length " + std::to_string(*options.seq_length) +
                       " exceeds the checkpoint's max_position_embeddings (" +
                       std::to_string(max_position_embeddings) + "); give at most that");
    limit = *options.seq_length;
  }
  // Megatron Core's inference engine sizes its buffers by it; past the positions it cannot go.
  if (options.inference_max_seq_length) limit = std::min(limit, *options.inference_max_seq_length);
  return limit;
}

GenerationModel load_generation_model(const GenerateOptions& options) {
  if (options.micro_batch_size < 1)
    throw UsageError("--micro-batch-size must be >= 1, got " + std::to_string(options.micro_batch_size));
  const ModelCheckpoint checkpoint = open_model_checkpoint(options.load, options.checkpoint_flags.ckpt_step);
  check_model_flags_agree(checkpoint, options.model_flags);
  GenerationModel loaded;
  loaded.max_sequence_length = generation_length_limit(options, checkpoint.config.max_position_embeddings);
  loaded.tokenizer = make_checkpoint_tokenizer(checkpoint, options.tokenizer, "mgt-generate");
  check_padded_vocab(checkpoint, *loaded.tokenizer, options.checkpoint_flags);
  // Before the weights load: sampling flags Megatron refuses fail in a second.
  validate_generation_settings(options.generation, loaded.tokenizer->vocab_size());
  // mgt-generate has no --profile: the backend's defaults.
  const BackendOptions backend_options;
  loaded.backend = make_backend(options.device, backend_options);
  apply_precision_flag(*loaded.backend, options.checkpoint_flags);
  log::info("compute device: " + loaded.backend->description());
  // Before the weights load: a model that cannot fit is refused with the numbers. The estimate
  // takes prompts of up to the checkpoint's --seq-length tokens plus the tokens to generate.
  const GptConfig& config = checkpoint.config;
  if (options.seq_length || options.inference_max_seq_length)
    log::info("prompt and completion together: at most " + std::to_string(loaded.max_sequence_length) + " tokens");
  MemoryEstimateRequest memory;
  memory.use = MemoryUse::kGeneration;
  memory.seq_length = std::max<int64_t>(
      1, std::min(loaded.max_sequence_length, config.seq_length + options.generation.max_new_tokens));
  memory.micro_batch_size = options.micro_batch_size;
  inference_weight_bytes(config, *loaded.backend, memory);
  check_memory(config, memory, memory_available_to(*loaded.backend), "generating with checkpoint " + checkpoint.directory);
  loaded.model = load_checkpoint_model(checkpoint, *loaded.backend);
  log::info("loaded " + checkpoint.directory + " (iteration " + std::to_string(checkpoint.metadata.iteration) + ", " +
            std::to_string(checkpoint.config.num_parameters()) + " parameters)");
  return loaded;
}

}  // namespace mgt
