#include "generate/generation_model.hpp"

#include <algorithm>

#include "ckpt/model_checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/backend_factory.hpp"
#include "model/memory_estimate.hpp"

namespace mgt {

GenerationModel load_generation_model(const GenerateOptions& options) {
  if (options.micro_batch_size < 1)
    throw UsageError("--micro-batch-size must be >= 1, got " + std::to_string(options.micro_batch_size));
  const ModelCheckpoint checkpoint = open_model_checkpoint(options.load);
  check_model_flags_agree(checkpoint, options.model_flags);
  GenerationModel loaded;
  loaded.tokenizer = make_checkpoint_tokenizer(checkpoint, options.tokenizer, "mgt-generate");
  check_padded_vocab(checkpoint, *loaded.tokenizer, options.checkpoint_flags);
  loaded.backend = make_backend(options.device);
  apply_precision_flag(*loaded.backend, options.checkpoint_flags);
  log::info("compute device: " + loaded.backend->description());
  // Before the weights load: a model that cannot fit is refused with the numbers. The estimate
  // takes prompts of up to the checkpoint's --seq-length tokens plus the tokens to generate.
  const GptConfig& config = checkpoint.config;
  MemoryEstimateRequest memory;
  memory.use = MemoryUse::kGeneration;
  memory.seq_length = std::max<int64_t>(
      1, std::min(config.max_position_embeddings, config.seq_length + options.generation.max_new_tokens));
  memory.micro_batch_size = options.micro_batch_size;
  check_memory(config, memory, memory_available_to(*loaded.backend), "generating with checkpoint " + checkpoint.directory);
  loaded.model = load_checkpoint_model(checkpoint, *loaded.backend);
  log::info("loaded " + checkpoint.directory + " (iteration " + std::to_string(checkpoint.metadata.iteration) + ", " +
            std::to_string(checkpoint.config.num_parameters()) + " parameters)");
  return loaded;
}

}  // namespace mgt
