// What generation runs on, loaded the same way for mgt-generate's prompt files and its server:
// the checkpoint's tokenizer (or the one the flags name), the compute device of --device, the
// longest sequence (--seq-length), the sampling flags, a memory check for --micro-batch-size
// sequences of the checkpoint's length plus the tokens to generate, then the weights.
#pragma once
#include <memory>

#include "generate/generate_job.hpp"
#include "kernels/backend.hpp"
#include "model/gpt_model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct GenerationModel {
  // Declared so that the model goes before the backend it was built on.
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<GptModel> model;
  // Prompt plus completion, in tokens (Generator's max_sequence_length).
  int64_t max_sequence_length = 0;
};

// The longest prompt plus completion `options` allow with a checkpoint of `max_position_embeddings`
// positions. Throws mgt::UsageError for a --seq-length beyond them.
int64_t generation_length_limit(const GenerateOptions& options, int64_t max_position_embeddings);

// Throws mgt::Error (unreadable checkpoint, flags that disagree with it, a model that does not
// fit in the device's memory, no such device).
GenerationModel load_generation_model(const GenerateOptions& options);

}  // namespace mgt
