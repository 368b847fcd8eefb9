// Which layers of a pipeline stage a training pass checkpoints under --recompute-granularity full,
// as Megatron-Core's TransformerBlock._checkpointed_forward
// (megatron/core/transformer/transformer_block.py) chooses them:
//   uniform: the stage's layers in consecutive groups of --recompute-num-layers, each group
//            checkpointed (only its input kept; its forward rerun as a whole before its backward);
//   block:   the first --recompute-num-layers layers of the stage checkpointed one by one, the
//            others keeping all their activations.
// A checkpointed group keeps only its input; the activations of its layers and the inputs of its
// later layers live in scratch shared by all groups of the pass, refilled by the recomputation.
// Without full granularity (and in evaluation passes, which keep nothing) no layer is
// checkpointed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"

namespace mgt {

// Selective recomputation of the core attention (--recompute-modules core_attn) in a training
// pass: one attention output and its softmax statistics shared by all layers, rebuilt from the
// kept query, key and value before each layer's attention backward.
bool recomputes_core_attention(const GptConfig& config, bool training);
// --recompute-modules layernorm in a training pass: one input-norm and one pre-MLP-norm output
// shared by all layers, rebuilt from the kept layer input and residual (and all-gathered under
// sequence parallelism) before the backward reads them.
bool recomputes_layernorm(const GptConfig& config, bool training);
// --recompute-modules mlp in a training pass: one fc1 output and one activation output shared by
// all layers, rebuilt by the dense MLP's forward before its backward (MoE layers keep theirs).
bool recomputes_mlp(const GptConfig& config, bool training);
// --recompute-modules moe_act in a training pass of an MoE model: one experts' activation output
// shared by all MoE layers, recomputed from the layer's kept fc1 output before its experts'
// backward (megatron/core/transformer/moe/experts.py).
bool recomputes_moe_act(const GptConfig& config, bool training);
// --recompute-modules moe (or --moe-layer-recompute) in a training pass of an MoE model: one set
// of MoE activations shared by all MoE layers, rebuilt by rerunning the layer from its kept input
// before its backward (the rerun counts no statistics: ForwardContext::recomputation).
bool recomputes_moe(const GptConfig& config, bool training);

struct RecomputeGroup {
  int64_t first = 0;  // the stage's layer index of its first layer
  int64_t count = 1;
  bool checkpointed = false;
};

// Arithmetic only (no per-layer tables): the memory estimate asks about any layer count.
class RecomputePlan {
public:
  // stage_layers: the layers of this pipeline stage. Throws a UsageError where Megatron cannot
  // run the configuration: uniform groups that do not divide the stage's layers (its last group
  // would index past the stage's layers).
  RecomputePlan(const GptConfig& config, int64_t stage_layers, bool training);

  // The group of the stage's layer l (a group of one where nothing is checkpointed).
  RecomputeGroup group_of(int64_t layer) const;
  bool checkpointed(int64_t layer) const { return group_of(layer).checkpointed; }
  // Whether the input of layer l is kept from the forward to the backward (every layer's except
  // the later layers of checkpointed groups).
  bool keeps_input(int64_t layer) const;
  int64_t layers_keeping_input() const;
  // Layers keeping their own activations (those not checkpointed).
  int64_t layers_keeping_activations() const;
  // Activation sets shared by the checkpointed groups, allocated besides the kept ones: uniform,
  // the group's layer count; block, none while a layer keeps its activations — the checkpointed
  // layers come first, so their backward (and recomputation) runs after the stage's last layer's,
  // whose set they then borrow, as Megatron's peak holds only the kept layers' activations.
  int64_t scratch_activation_sets() const;
  // The stage's layer whose activation set the checkpointed layers borrow, or −1 (they have
  // their own scratch sets).
  int64_t activation_lender() const;
  // Inputs of later layers inside a checkpointed group, shared by all groups.
  int64_t scratch_inputs() const;
  bool any_checkpointed() const;

  // "uniform: 4 groups of 2 layers checkpointed" — for the start-up line.
  std::string describe() const;

private:
  int64_t layers_;
  bool full_;
  RecomputeMethod method_;
  int64_t group_size_;  // --recompute-num-layers
  // block: the checkpointed layers, min(--recompute-num-layers, stage layers).
  int64_t block_layers() const { return group_size_ < layers_ ? group_size_ : layers_; }
};

// One line for the start-up log: what a training pass of a stage of `stage_layers` layers
// recomputes; empty without recomputation.
std::string describe_recomputation(const GptConfig& config, int64_t stage_layers);

}  // namespace mgt
