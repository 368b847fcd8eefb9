#include "train/checkpoint_parameter_read.hpp"

#include <span>

#include "ckpt/checkpoint_discovery.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/log.hpp"
#include "model/parameter_sharding.hpp"

namespace mgt {

std::optional<std::string> checkpoint_to_resume(const std::string& load_dir, std::optional<std::int64_t> ckpt_step) {
  const std::optional<ckpt::CheckpointToResume> found = ckpt::find_checkpoint_to_load(load_dir, ckpt_step);
  if (!found) return std::nullopt;
  if (!found->note.empty()) log::warn(found->note);
  return found->directory;
}

void read_parameter_part(const ckpt::ShardedCheckpoint& checkpoint, const std::string& path, const ParameterEntry& e,
                         const TensorParallelRank& tensor, std::vector<float>& whole, std::vector<float>& out) {
  const TensorParallelRank& tp = e.partition(tensor);  // an expert's: its expert-tensor-parallel split
  std::vector<float>& target = tp.size == 1 ? out : whole;
  target.resize(static_cast<std::size_t>(e.global_numel()));
  checkpoint.read_whole(path, ckpt::TensorDType::Float32, e.global_shape,
                        std::as_writable_bytes(std::span<float>(target)));
  if (tp.size > 1) out = shard_tensor(e, tp, whole);
}

void check_attention_heads(const ckpt::ShardedCheckpoint& checkpoint, const GptConfig& config) {
  std::optional<std::int64_t> saved;
  try {
    JsonScalars args(checkpoint.metadata().args_json, "the checkpoint's arguments");
    if (args.contains("num_attention_heads")) saved = args.integer("num_attention_heads");
  } catch (const Error&) {
    return;  // a checkpoint without readable arguments: nothing to compare
  }
  if (saved && *saved != config.num_attention_heads)
    throw Error("checkpoint " + checkpoint.directory() + " was saved with --num-attention-heads " +
                std::to_string(*saved) + " (this run: " + std::to_string(config.num_attention_heads) + ")");
}

}  // namespace mgt
