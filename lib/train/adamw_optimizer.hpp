// Megatron's optimizer for --optimizer adam over the model's contiguous buffers: global L2
// gradient norm, skip of a step whose gradients are not finite, clipping by --clip-grad, then
// AdamW per parameter group — Megatron's default groups: weight decay multiplier 0 for biases
// and 1-D tensors (the parameter table's weight_decay flag), 1 otherwise; one learning rate.
//
// Across data-parallel ranks (megatron/core/distributed/distributed_data_parallel.py,
// megatron/core/optimizer/distrib_optimizer.py):
//   plain        reduce_gradients() all-reduces the gradient buffer (the micro-batch losses are
//                already scaled by 1 / (micro-batches · data-parallel size), Megatron's
//                gradient_scaling_factor folded in, so the sum is the average); every rank then
//                takes the same step on its whole copy.
//   distributed  (--use-distributed-optimizer) this rank keeps Adam's moments for its shard of the
//                flat buffer only (dist/buffer_shards.hpp). reduce_gradients() reduce-scatters,
//                the norm is the square root of the shards' sums of squares all-reduced, each
//                rank clips and updates its shard, and the updated weights are all-gathered.
// Either way every rank takes the same decision to skip or clip, from the same global norm.
//
// Under tensor parallelism (the model's parameters are this tensor-parallel rank's shards) the
// data-parallel group is the one of this tensor-parallel rank, so the distributed optimizer
// shards each rank's own buffer within it, as Megatron does. The norm counts every replicated
// tensor once (ParameterEntry::counted_on: on tensor-parallel rank 0) and all-reduces the sum of
// squares over the model-parallel group as well (Megatron's get_grad_norm_fp32 over
// param_is_not_tensor_parallel_duplicate parameters). Under pipeline parallelism the
// model-parallel group spans the stages too, and the last stage's copy of a tied word embedding
// is left out (Megatron's param_is_not_shared).
//
// Under expert parallelism (megatron/core/distributed/distributed_data_parallel.py's
// expert_parallel_buffers) the routed experts' tensors form a region of their own at the end of
// the buffers (ParameterTable::expert_begin): their gradients are reduced, and with the
// distributed optimizer sharded, over the expert-data-parallel group; the rest as above. The
// norm counts each expert's tensors once, as Megatron's ChainedOptimizer combines the dense and
// the expert optimizers' norms: the region's sum of squares (of this rank's shards with the
// distributed optimizer, summed over the expert-data-parallel group) is summed over the expert
// tensor-model-pipeline group, which holds one copy of every expert whatever the expert
// tensor-parallel size, and added to the dense parameters' (summed over the data-parallel group
// when sharded, then over the model-parallel group).
//
// On every backend so far the model's fp32 parameters are themselves the master weights, so no
// separate master copy is kept (nor sharded); checkpoints record that (train_checkpoint.hpp).
// The moments may be kept in bf16 (AdamWSettings); they are read and written as floats.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dist/buffer_shards.hpp"
#include "dist/communicator.hpp"
#include "model/gpt_parameters.hpp"
#include "train/bf16_gradient_copy.hpp"
#include "train/fp8_param_gather.hpp"

namespace mgt {

struct AdamWSettings {
  double beta1 = 0.9;      // --adam-beta1
  double beta2 = 0.999;    // --adam-beta2
  double eps = 1e-8;       // --adam-eps
  double clip_grad = 1.0;  // --clip-grad; 0 disables clipping
  // The moments' types: bf16 with --use-precision-aware-optimizer's --exp-avg-dtype /
  // --exp-avg-sq-dtype bf16 (Backend::adamw_update updates them in fp32).
  FloatType exp_avg_type = FloatType::kF32;
  FloatType exp_avg_sq_type = FloatType::kF32;
};

// The groups of the routed experts' region of the buffers (ParameterTable::expert_begin): null
// without expert parallelism.
struct ExpertGradientGroups {
  dist::Communicator* expert_data_parallel = nullptr;
  // Megatron's expert tensor-model-pipeline group (dist::GroupKind::ExpertTensorModelPipeline).
  dist::Communicator* expert_tensor_model_pipeline = nullptr;
};

struct OptimizerStep {
  double grad_norm = 0.0;  // before clipping; NaN or Inf when the step was skipped
  bool applied = false;    // false: gradients not finite, nothing changed
  // With StepRequest::count_zeros, when applied: the zero elements of the clipped gradients,
  // each tensor counted once over the ranks (Megatron's count_zeros_fp32, megatron/core/optimizer/
  // clip_grads.py, over the gradient-norm group); a float, as Megatron's .item() of a float tensor.
  std::optional<double> num_zeros;
};

// One step's rates: from the scheduler, per parameter group.
struct StepRequest {
  double lr = 0.0;
  // The word embedding's and output layer's rate under --decoupled-lr (Megatron's param groups
  // with is_decoupled_lr, megatron/core/optimizer/__init__.py _get_param_groups); unset: lr.
  std::optional<double> decoupled_lr;
  double weight_decay = 0.0;   // before each group's multiplier (0 for biases and 1-D tensors)
  bool loss_finite = true;     // false skips the step (see step())
  bool count_zeros = false;    // --log-num-zeros-in-grad at an iteration that logs it
};

class AdamWOptimizer {
public:
  // One rank: the whole buffer, nothing communicated.
  AdamWOptimizer(GptParameters& params, const AdamWSettings& settings);
  // Over the data-parallel `group` (must outlive the optimizer); `distributed`: shard the state
  // (--use-distributed-optimizer).
  // `model_parallel` (may be null; must outlive the optimizer): the ranks holding the other
  // tensor-parallel shards and pipeline stages of the same replica, whose sums of squares
  // complete the norm.
  // `experts`: with expert parallelism, the groups of the experts' region (they must outlive
  // the optimizer).
  AdamWOptimizer(GptParameters& params, const AdamWSettings& settings, dist::Communicator& group,
                 bool distributed, dist::Communicator* model_parallel = nullptr,
                 const ExpertGradientGroups& experts = {});

  // --grad-reduce-in-bf16: reduce_gradients sums bf16 copies of the gradients (`copy` must
  // outlive the optimizer; null: the fp32 gradients themselves).
  void set_bf16_reduction(Bf16GradientCopy* copy) { bf16_ = copy; }

  // Collective: sums the gradient buffer over the data-parallel group (all of it, or this rank's
  // shard with the distributed optimizer), the experts' region over theirs. Call once per
  // iteration, after the micro-batches. `from`: only the regions that begin there or later (the
  // experts', where --overlap-grad-reduce reduced the dense parameters' buckets already).
  void reduce_gradients(std::int64_t from = 0);

  // Collective: one step on the reduced gradients (clipped in place). lr and weight_decay come
  // from the scheduler; a group's decay is weight_decay × its multiplier. loss_finite false (the
  // iteration's loss is NaN or Inf) skips the step like a non-finite gradient; it enters the
  // reduced norm, so every rank of the groups takes the same decision.
  OptimizerStep step(double lr, double weight_decay, bool loss_finite = true) {
    return step(StepRequest{lr, std::nullopt, weight_decay, loss_finite, false});
  }
  OptimizerStep step(const StepRequest& request);

  // With the distributed optimizer: step() leaves the all-gather of the updated weights to the
  // caller (--overlap-param-gather, train/overlapped_data_parallel.hpp), which must complete it
  // before the weights are read.
  void set_param_gather_deferred(bool deferred) { param_gather_deferred_ = deferred; }
  // --fp8-param-gather: the all-gather of the region `gather` covers moves the FP8 linear layers'
  // weights as FP8 codes (`gather` must outlive the optimizer). One per sharded region: the one
  // before the experts' over the data-parallel group, and under expert parallelism the experts'
  // over the expert-data-parallel group, as Megatron's distributed optimizer gathers the fp8
  // parameters of its dense and expert-parallel buffers each over its own group. A region given
  // none all-gathers its fp32 weights. Throws unless gather.region() is one of the regions.
  void add_fp8_param_gather(Fp8ParamGather& gather);

  // Adam's t: steps applied so far (skipped steps do not count).
  std::int64_t steps() const { return steps_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }
  const AdamWSettings& settings() const { return settings_; }
  bool distributed() const { return distributed_; }
  // The range of the flat buffer whose moments this rank keeps (the whole buffer unless
  // distributed); with expert parallelism that of the region before the experts'.
  BufferShard shard() const { return regions_.front().shard; }
  // The ranges whose moments this rank keeps, one per region of the buffer.
  std::vector<BufferShard> shards() const;

  // The moments of whole tensors (the rank's tensor-parallel shards), e.g. to compare layouts;
  // a checkpoint instead stores each rank's own part (owned_part below). With the distributed
  // optimizer, collect_state() (collective over
  // the data-parallel group) copies every rank's shard to data-parallel rank 0, whose
  // read_exp_avg / read_exp_avg_sq read that copy until release_collected_state(); they throw on
  // other ranks. Without it they read the rank's own moments and collect_state() does nothing.
  void collect_state();
  void release_collected_state();
  std::vector<float> read_exp_avg(const ParameterEntry& e) const;
  std::vector<float> read_exp_avg_sq(const ParameterEntry& e) const;
  // Whole-tensor values (the size is checked); with the distributed optimizer each rank keeps the
  // part inside its shard, so every rank passes every tensor.
  void write_exp_avg(const ParameterEntry& e, std::span<const float> values);
  void write_exp_avg_sq(const ParameterEntry& e, std::span<const float> values);
  // The part of e's elements (in flat-buffer positions) whose moments this rank keeps, and
  // their values: what a rank writes into its own checkpoint shard, with no collective.
  BufferShard owned_part(const ParameterEntry& e) const;
  std::vector<float> read_owned_exp_avg(const ParameterEntry& e) const;
  std::vector<float> read_owned_exp_avg_sq(const ParameterEntry& e) const;

private:
  // A run of the flat buffer reduced and sharded over one group: everything, or with expert
  // parallelism the dense part and the experts' part.
  struct Region {
    BufferShard range;                     // in the buffer
    dist::Communicator* group = nullptr;   // null: no other rank holds these elements
    // The ranks holding the rest of the region's tensors (the model-parallel group, the experts'
    // tensor-model-pipeline group), over which its sums of squares are completed, or null.
    dist::Communicator* norm_group = nullptr;
    BufferShard shard;                     // this rank's part of range
    std::int64_t moment_offset = 0;        // where shard's moments start in exp_avg_
    // The shard's runs of equal weight decay and learning rate (Backend::adamw_update).
    std::vector<std::int64_t> segment_ends;
    std::vector<std::int64_t> segment_flags;
    std::vector<ElementRange> norm_ranges;  // the parts of the shard that enter the norm
    Fp8ParamGather* fp8_gather = nullptr;   // --fp8-param-gather's all-gather of the region, or null
    bool sharded() const { return shard.begin != range.begin || shard.end != range.end; }
  };
  void add_region(BufferShard range, dist::Communicator* group, dist::Communicator* norm_group);
  void allocate_moments(std::int64_t size);
  const Region& region_of(const ParameterEntry& e) const;

  std::vector<float> read_moment(const DeviceBuffer& moment, const std::vector<float>& collected,
                                 const ParameterEntry& e) const;
  void write_moment(DeviceBuffer& moment, const ParameterEntry& e, std::span<const float> values);
  std::vector<float> collect_moment(const DeviceBuffer& moment);
  std::vector<float> read_owned_moment(const DeviceBuffer& moment, const ParameterEntry& e) const;

  static void build_segments(const GptParameters& params, Region& region);
  static std::vector<ElementRange> counted_ranges(const GptParameters& params, const BufferShard& shard);
  // Zeros in the gradients of the norm ranges that belong to a tensor (not the alignment gaps),
  // summed over the gradient-norm group. Read on the host: no backend operation counts zeros.
  double count_zeros_in_grads();
  // Σ over the regions of their sums (ranges), each summed over its group when sharded, then over
  // its norm group.
  double reduce_over_regions(const std::vector<double>& per_region);

  GptParameters* params_;
  AdamWSettings settings_;
  dist::Communicator* group_ = nullptr;  // null: one rank
  bool distributed_ = false;
  Bf16GradientCopy* bf16_ = nullptr;
  bool param_gather_deferred_ = false;
  std::vector<Region> regions_;
  DeviceBuffer exp_avg_;     // the regions' shards one after another
  DeviceBuffer exp_avg_sq_;
  std::int64_t steps_ = 0;
  // On data-parallel rank 0 between collect_state() and release_collected_state().
  bool collected_ = false;
  std::vector<float> collected_exp_avg_;
  std::vector<float> collected_exp_avg_sq_;
};

}  // namespace mgt
