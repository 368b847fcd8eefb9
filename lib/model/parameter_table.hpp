// The table of a GPT model's parameters: Megatron's local-spec names, global and per-rank shapes,
// where each tensor lives in the one flat parameter buffer (and the gradient buffer of the same
// layout), how tensor parallelism partitions it, whether weight decay applies and how it is
// initialised. Pure layout: no memory is touched here, so checkpoint and optimizer code can
// compute the table of any rank without building a model.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/pipeline_stage.hpp"

namespace mgt {

struct TensorParallelRank {
  int64_t size = 1;
  int64_t rank = 0;
};

// This rank's place among the expert-parallel ranks (--expert-model-parallel-size): it holds the
// routed experts [rank · E/size, (rank + 1) · E/size) of each MoE layer, named by their global
// index, so that names (and checkpoints) do not depend on the expert-parallel size.
struct ExpertParallelRank {
  int64_t size = 1;
  int64_t rank = 0;
  // The expert-tensor-parallel ranks (--expert-tensor-parallel-size other than 1 and the
  // tensor-parallel size, MoeConfig::experts_on_own_tensor_grid) that split each of these experts'
  // weights as Megatron's expert MLPs do (linear_fc1 column-, linear_fc2 row-parallel), and this
  // rank's place among them. Size 0: the experts follow the tensor-parallel ranks (or are whole).
  int64_t tensor_size = 0;
  int64_t tensor_rank = 0;
  // The global index of local expert j of a model with `experts` experts.
  int64_t global_expert(int64_t experts, int64_t j) const { return rank * (experts / size) + j; }
};

inline constexpr int64_t kNotPartitioned = -1;

// Every tensor starts at a multiple of this many elements (256 bytes), the alignment GPU GEMM
// and vectorised kernels want; the gaps are zero in both buffers.
inline constexpr int64_t kParameterAlignment = 64;

enum class ParameterInit {
  kNormal,   // N(0, init_std)
  kUniform,  // U(-init_std, init_std): --init-method-xavier-uniform's weights
  kZeros,   // biases
  kOnes,    // norm weights
};

struct ParameterEntry {
  std::string name;
  std::vector<int64_t> global_shape;  // the unsharded tensor (TP = 1 layout)
  std::vector<int64_t> local_shape;   // this rank's shard
  int64_t offset = 0;                 // first element in the local flat buffers
  // 0: column-parallel (output features split), 1: row-parallel (input features split),
  // kNotPartitioned: replicated on every tensor-parallel rank.
  int64_t partition_dim = kNotPartitioned;
  // Dim 0 of the global tensor is this many equal blocks, each split across the ranks on its own
  // (2 for SwiGLU's linear_fc1, whose shard is [gate_rank ; up_rank]: the TP-merged matrix is
  // gate_0 up_0 gate_1 up_1 …, and a reshard splits each shard in halves first).
  int64_t partition_chunks = 1;
  // Rows of the split dimension that always stay together on one rank: (heads/groups + 2) ·
  // kv_channels for the fused QKV weight and bias, one query group's q, k and v rows in
  // Megatron's per-group layout (q₁ q₂ k₁ v₁ | q₃ q₄ k₂ v₂ | …), so a shard holds whole groups and
  // resharding is a plain re-chunking along dim 0 at group boundaries; 1 otherwise.
  int64_t partition_block = 1;
  // Megatron's param_is_not_tensor_parallel_duplicate, negated: the tensor is replicated, the
  // same on every tensor-parallel rank (norms, position embeddings, row-parallel biases), so
  // gradient norms and parameter counts take it from tensor-parallel rank 0 only. False for the
  // whole experts that expert parallelism spreads over the tensor-parallel ranks
  // (--expert-tensor-parallel-size 1): each rank holds its own.
  bool tensor_parallel_replicated = false;
  // Megatron's sequence_parallel attribute: a replicated tensor applied to the activations that
  // --sequence-parallel splits along the sequence (norm weights and biases, row-parallel biases).
  // Each rank's gradient then covers its part of the sequence only, and the model all-reduces
  // these gradients over the tensor-parallel group (GptModel::all_reduce_partial_grads).
  bool sequence_parallel = false;
  // Replicated, yet each tensor-parallel rank's gradient covers only its own heads: the query and
  // key norms of --qk-layernorm. The model all-reduces these gradients over the tensor-parallel
  // group with or without sequence parallelism, as Megatron's finalize_model_grads sums them
  // (megatron/core/distributed/finalize_model_grads.py, _allreduce_non_tensor_model_parallel_grads).
  bool tensor_parallel_partial = false;
  // Megatron's `shared` attribute: the last pipeline stage's copy of the word embedding, the
  // tied output weight (pipeline_stage.hpp). It equals the first stage's tensor, so norms and
  // parameter counts leave it out and checkpoints store the first stage's.
  bool pipeline_duplicate = false;
  // Megatron's `allreduce = False` attribute: a routed expert's weight, held by one expert-
  // parallel rank (ExpertParallelRank). Its gradient is reduced over the expert-data-parallel
  // ranks only, and norms add the expert-parallel ranks' sums.
  bool expert_parallel = false;
  // A routed expert's weight split over its expert-tensor-parallel ranks (ExpertParallelRank::
  // tensor_size) rather than the tensor-parallel ones: the split the partition follows, whatever
  // tensor-parallel rank is passed below. Size 0 otherwise.
  TensorParallelRank expert_tensor{0, 0};
  bool weight_decay = true;  // Megatron: no decay for 1-D tensors and biases
  ParameterInit init = ParameterInit::kNormal;
  double init_std = 0.0;

  // The ranks the tensor is split over: expert_tensor where set, else tp.
  const TensorParallelRank& partition(const TensorParallelRank& tp) const {
    return expert_tensor.size > 0 ? expert_tensor : tp;
  }
  int64_t numel() const;         // local elements
  int64_t global_numel() const;  // elements of the unsharded tensor
  // Row-major index in the global tensor of this rank's local element `local_index` (split as
  // partition(tp)).
  int64_t global_index(int64_t local_index, const TensorParallelRank& tp) const;
  // Whether the rank's copy counts in a norm or a sum over the whole model: always for a
  // partitioned tensor, on tensor-parallel rank 0 only for a replicated one, never for the last
  // pipeline stage's copy of the word embedding.
  bool counted_on(const TensorParallelRank& tp) const {
    return !pipeline_duplicate && (!tensor_parallel_replicated || tp.rank == 0);
  }
};

struct ParameterTable {
  std::vector<ParameterEntry> entries;  // in buffer order
  int64_t buffer_size = 0;              // local elements including alignment gaps
  // With more than one expert-parallel rank, the routed experts' tensors come last, from this
  // offset to buffer_size (Megatron's separate expert-parallel buffers): the two regions are
  // reduced and sharded over different groups. buffer_size otherwise (no such region).
  int64_t expert_begin = 0;

  const ParameterEntry* find(std::string_view name) const;
  // Throws mgt::Error when the name is not in the table.
  const ParameterEntry& at(std::string_view name) const;
};

// Checks that tp divides what tensor parallelism splits, with messages naming the flags.
void validate_tensor_parallel(const GptConfig& config, const TensorParallelRank& tp);

// The table for one tensor-parallel rank, in the order embedding, layers 0…L−1, final norm,
// output layer. The config is resolved first. For a pipeline stage, only what the stage holds:
// the embedding on the first stage, its layers (by their global numbers), and the final norm
// and output layer on the last — there, with tied embeddings, the word embedding's copy
// (pipeline_duplicate) at the output layer's place.
// With expert parallelism (ep.size > 1), each MoE layer's routed experts are this rank's only,
// placed after everything else (ParameterTable::expert_begin).
ParameterTable gpt_parameter_table(const GptConfig& config, const TensorParallelRank& tp = {},
                                   const PipelineStage& stage = {}, const ExpertParallelRank& ep = {});

// Name prefix of layer i's parameters: "decoder.layers.{i}".
std::string layer_prefix(int64_t layer);

// Megatron's is_embedding_or_output_parameter (megatron/core/models/common/language_module/
// language_module.py): the word embedding (on the first stage, and its tied copy on the last)
// and the untied output layer. --decoupled-lr gives them their own learning rate.
bool is_embedding_or_output_parameter(const ParameterEntry& entry);

}  // namespace mgt
