// What generation runs on, loaded the same way for mgt-generate's prompt files and its server:
// the checkpoint's tokenizer (or the one the flags name), the compute device of --device, a
// memory check for --micro-batch-size sequences of the checkpoint's length plus the tokens to
// generate, then the weights.
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
};

// Throws mgt::Error (unreadable checkpoint, flags that disagree with it, a model that does not
// fit in the device's memory, no such device).
GenerationModel load_generation_model(const GenerateOptions& options);

}  // namespace mgt
