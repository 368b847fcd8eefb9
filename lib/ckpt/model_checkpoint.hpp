// A checkpoint opened to run its model (mgt-eval, mgt-generate, mgt-ckpt-convert): the
// architecture comes from the arguments the checkpoint carries, the weights from its model
// tensors; optimizer and RNG state are not read. So a user names only --load, as with Megatron's
// tasks/main.py, and model-shape flags given anyway must agree with the checkpoint.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ckpt/checkpoint_metadata.hpp"
#include "kernels/backend.hpp"
#include "model/gpt_config.hpp"
#include "model/gpt_model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct ModelCheckpoint {
  std::string directory;   // the iteration directory read, e.g. SAVE/iter_0000100
  std::string shard_path;  // its first shard file (mp_rank_00.h5, mp_rank_00_000.h5, ...)
  ckpt::CheckpointMetadata metadata;
  GptConfig config;        // resolved; dropout as trained (inference never applies it)
};

// `load` is a save directory (the tracker file picks the iteration, as --load does in Megatron)
// or an iteration directory itself, of any parallel layout; with a `step` (--ckpt-step, 0 counting
// as none), that iteration of a save directory. Throws mgt::Error when there is no checkpoint
// there, or when its arguments do not describe a model.
ModelCheckpoint open_model_checkpoint(const std::string& load, std::optional<std::int64_t> step = std::nullopt);

// The model configuration stored in a checkpoint's arguments (Megatron's argument names as
// keys, as mgt-train writes them). Throws mgt::Error naming `what` and the missing key.
GptConfig gpt_config_from_args_json(const std::string& args_json, const std::string& what);

// The arguments JSON of a model: every key gpt_config_from_args_json reads, Megatron's names.
// gpt_config_from_args_json(model_args_json(c)) == c.resolved() (dropout and init included).
std::string model_args_json(const GptConfig& config);

// Writes a weights-only checkpoint of iteration `iteration` into save_dir (published atomically
// with the tracker file, as training saves) and returns its directory. args_json must describe
// the model (model_args_json, or a training run's arguments).
std::string save_model_checkpoint(const std::string& save_dir, std::int64_t iteration, const GptParameters& params,
                                  const std::string& args_json, const std::string& tokenizer_json = "{}");

// Builds the model on `backend` and reads every weight, checking each shape; throws mgt::Error
// naming the tensor otherwise.
std::unique_ptr<GptModel> load_checkpoint_model(const ModelCheckpoint& checkpoint, Backend& backend);

// Model-shape flags from a command line, Megatron's names without "--" → the value as typed
// (switches: "true"). Each must agree with the checkpoint; throws mgt::UsageError naming the
// first that does not ("--hidden-size 512 disagrees with the checkpoint (256)").
void check_model_flags_agree(const ModelCheckpoint& checkpoint,
                             const std::map<std::string, std::string>& given);

// The tokenizer: built from `flags` when they name a type, otherwise from the description the
// checkpoint carries (type and file paths as training saw them); a checkpoint that records none
// (an import from Hugging Face) takes --vocab-file and --merge-file alone as GPT2BPETokenizer,
// saying so as `program` on standard error. Throws mgt::Error when nothing names a tokenizer,
// and when the tokenizer's vocabulary does not fit the model's padded vocabulary.
std::unique_ptr<Tokenizer> make_checkpoint_tokenizer(const ModelCheckpoint& checkpoint,
                                                     const std::optional<TokenizerOptions>& flags,
                                                     std::string_view program);

}  // namespace mgt
