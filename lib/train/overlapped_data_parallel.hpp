// --overlap-grad-reduce and --overlap-param-gather (megatron/core/distributed/
// distributed_data_parallel.py, param_and_grad_buffer.py): the data-parallel reduction of the
// gradients and the all-gather of the updated weights, bucket by bucket (gradient_buckets.hpp),
// started as soon as a bucket is ready and waited for only where its result is needed.
//
// Gradients: during the iteration's last backward (arm() before it; the earlier micro-batches'
// backwards only accumulate), a bucket's reduction starts once the backward has finished every
// gradient in it — an all-reduce, or with the distributed optimizer a reduce-scatter of the
// bucket's part of every rank's shard (plus the all-reduce of the buffer's remainder the last
// rank owns, as reduce_scatter_shards does). Buckets whose gradients the model finalises after
// the backward (sequence parallelism, tied embeddings across stages) start at start_remaining(),
// after that finalisation, so that every element is summed in the order the one-shot reduction
// (AdamWOptimizer::reduce_gradients) sums it: the results are bit for bit the same. (Except where
// the reductions started alone go to NCCL's kernels and the others to the copy engines: with more
// than two ranks NCCL adds in another order.)
//
// The tail: the last bucket the backward finishes (the word embedding's, complete only at the
// backward's end) and the buckets started after the backward are started alone
// (dist::Communicator::set_alone): little or nothing computes beside them, and over NCCL with the
// copy engines they then run in NCCL's kernels, which move a reduction alone faster (on four
// H200s at the 1.3B shape with the distributed optimizer and both overlaps, 98.2-98.8% of one
// GPU's per-GPU rate against 96.6-97.2% with the tail on the copy engines).
//
// Weights (distributed optimizer only): after the step, each bucket's all-gather of the updated
// shards starts, and the next forward waits for a bucket just before its first block that reads
// it (the model's ParameterHooks); finish_param_gather() waits for all, where something else
// reads the weights (a checkpoint, the parameter norm) or no forward follows. Under bf16 (or
// fp16) the gathers bring the compute copy, as Megatron's bring its bf16 parameters: half the
// bytes, and no conversion of the whole buffer before the forward. The fp32 weights of the other
// shards then stay behind until finish_param_gather() gathers them too (unless the forward reads
// them: GptParameters::forward_reads_params).
//
// Under expert parallelism the routed experts' region at the end of the buffers
// (ParameterTable::expert_begin) is sharded over the expert-data-parallel group: its gradients are
// reduced after the backward (AdamWOptimizer::reduce_gradients), and its weights gathered over
// that group beside the dense buckets', the forward waiting for them before the first block that
// reads them (an MoE layer's range reaches into the region), as Megatron's expert-parallel
// buffers gather over their own group.
//
// Under --fp8-param-gather each rank casts its part of the FP8 linear layers' weights after the
// step (Fp8ParamGather::cast_shard), and each bucket's all-gathers bring its FP8 weights' codes
// (one byte per element) beside the rest of its elements: the FP8 codes overlap the forward
// bucket by bucket as the other parameters do, and a weight's transposed copy is derived once
// the forward waited for its bucket (Megatron's finish_param_sync, post_all_gather_processing).
// The experts' region does the same over its own group, its codes in its one gather.

#pragma once
#include <cstdint>
#include <vector>

#include "dist/communicator.hpp"
#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"
#include "model/parameter_hooks.hpp"
#include "train/bf16_gradient_copy.hpp"
#include "train/fp8_param_gather.hpp"
#include "train/gradient_buckets.hpp"

namespace mgt {

// The routed experts' region of the buffers under expert parallelism, and the group that shards it.
struct ExpertParameterRegion {
  std::int64_t begin = 0;  // ParameterTable::expert_begin
  std::int64_t end = 0;    // the buffer's size
  dist::Communicator* group = nullptr;  // the expert-data-parallel group; null: no such region
};

class OverlappedDataParallel final : public ParameterHooks {
public:
  // `group`: the data-parallel group; `distributed`: --use-distributed-optimizer (each rank's
  // shard as dist/buffer_shards.hpp lays it out). params and group must outlive this.
  // `bf16` (may be null; must outlive this): --grad-reduce-in-bf16, each bucket reduced as a bf16
  // copy and taken back when its reduction is waited for.
  // `experts`: under expert parallelism, the experts' region, whose weights start_param_gather
  // gathers over its group (which must outlive this) too.
  OverlappedDataParallel(GptParameters& params, std::vector<GradientBucket> buckets, dist::Communicator& group,
                         bool distributed, Bf16GradientCopy* bf16 = nullptr, const ExpertParameterRegion& experts = {});
  OverlappedDataParallel(const OverlappedDataParallel&) = delete;
  OverlappedDataParallel& operator=(const OverlappedDataParallel&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  // --fp8-param-gather (`gather` must outlive this; null: none).
  void set_fp8_param_gather(Fp8ParamGather* gather) { fp8_gather_ = gather; }
  // The same for the experts' region, over its group (`gather` must cover that region).
  void set_fp8_expert_param_gather(Fp8ParamGather* gather) { fp8_expert_gather_ = gather; }

  // The next backward is the iteration's last: its gradients are final as it finishes them.
  void arm();
  // After the model's finalisation: starts the reductions not started yet.
  void start_remaining();
  // Waits for every reduction: the buffer is then as AdamWOptimizer::reduce_gradients leaves it.
  void finish_gradient_reduction();

  // After a step that updated this rank's shard (distributed optimizer): starts the all-gathers.
  void start_param_gather();
  // Waits for every all-gather still in flight; the fp32 weights are then whole on every rank.
  void finish_param_gather();

  void before_parameter_use(std::int64_t begin, std::int64_t end) override;
  void gradients_done_from(std::int64_t begin) override;

private:
  void start_reduction(std::size_t bucket);
  // The counts of the chunked collectives over [begin, end) ∩ the evenly split prefix of the
  // buffer: each rank's part of it.
  std::vector<std::int64_t> shard_counts(std::int64_t begin, std::int64_t end) const;
  // Waits for the all-gathers in flight, whatever they gather.
  void wait_param_gathers();

  GptParameters* params_;
  std::vector<GradientBucket> buckets_;
  dist::Communicator* group_;
  bool distributed_;
  Bf16GradientCopy* bf16_;
  Fp8ParamGather* fp8_gather_ = nullptr;
  Fp8ParamGather* fp8_expert_gather_ = nullptr;
  // The --fp8-param-gather gathers set (the dense region's, then the experts').
  std::vector<Fp8ParamGather*> fp8_gathers() const;
  std::int64_t per_rank_ = 0;  // shard size of the evenly split prefix
  std::int64_t even_ = 0;      // its end; the last rank also owns [even_, buffer size)
  bool armed_ = false;
  bool gathers_compute_copy_ = false;  // the weights' all-gathers bring the compute copy
  bool params_behind_ = false;         // ... and the other shards' fp32 weights are behind
  std::vector<bool> started_;
  std::vector<std::vector<dist::PendingCollective>> reductions_;  // per bucket
  std::vector<std::vector<dist::PendingCollective>> gathers_;     // per bucket
  ExpertParameterRegion experts_;
  std::vector<dist::PendingCollective> expert_gathers_;
};

}  // namespace mgt
