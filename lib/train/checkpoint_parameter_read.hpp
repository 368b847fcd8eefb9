// Reading a run's parameters out of a checkpoint of any layout: the checkpoint --load resumes,
// and one tensor assembled whole from the stored pieces, of which this rank keeps its part.
// Shared by load_train_checkpoint (train_checkpoint.hpp) and the upcycling of a dense checkpoint
// (moe_upcycling_load.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/sharded_checkpoint.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

// The checkpoint to resume in load_dir (ckpt/checkpoint_discovery.hpp), with a warning when it is
// not the one the tracker file names; nullopt when load_dir holds no checkpoint at all. With
// --ckpt-step, that iteration's.
std::optional<std::string> checkpoint_to_resume(const std::string& load_dir,
                                                std::optional<std::int64_t> ckpt_step = std::nullopt);

// mgt::Error when the checkpoint was saved with another --num-attention-heads than `config`'s, as
// Megatron's check_checkpoint_args refuses it: with the same hidden size every tensor keeps its
// shape, and the heads would be cut from the fused QKV weight at other rows. (Its other
// comparisons, num_layers and hidden_size, the tensors' names and shapes make.)
void check_attention_heads(const ckpt::ShardedCheckpoint& checkpoint, const GptConfig& config);

// The whole tensor at `path`, assembled from whatever pieces the checkpoint's layout stored, then
// this rank's tensor-parallel shard of it as parameter e (a copy only under tensor parallelism);
// `whole` is scratch. mgt::Error naming the tensor when its shape is not e's.
void read_parameter_part(const ckpt::ShardedCheckpoint& checkpoint, const std::string& path, const ParameterEntry& e,
                         const TensorParallelRank& tensor, std::vector<float>& whole, std::vector<float>& out);

}  // namespace mgt
