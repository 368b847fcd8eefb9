// Runs a pipeline stage's schedule (pipeline_schedule.hpp) on the model's stage_* calls, moving
// activations and their gradients between neighbouring stages with the pipeline-parallel group's
// point-to-point operations, as Megatron's p2p_communication.py does: plain send/recv where
// Megatron's send_forward / recv_forward / send_backward / recv_backward are, one send_recv
// (both halves posted together) where its send_forward_recv_backward and
// send_backward_recv_forward are, so blocking transports cannot deadlock. The pipeline group's
// rank r is stage r (parallel_layout.hpp's order).
//
// The loss is computed on the last stage; its sums are summed over the pipeline group (the other
// stages contribute zeros) so that every stage returns the iteration's loss, which the trainer
// needs to skip non-finite steps together and rank 0 prints (Megatron prints from the last rank).
#pragma once
#include <cstdint>
#include <functional>

#include "dist/communicator.hpp"
#include "model/gpt_model.hpp"
#include "train/batch_prefetcher.hpp"

namespace mgt {

class PipelineExecutor {
public:
  // `model` is this rank's stage; `pipeline` its pipeline-parallel group (size = stages, rank =
  // stage). Both must outlive the executor. A model of several chunks
  // (PipelineStage::interleaved()) runs Megatron's interleaved schedule instead
  // (interleaved_pipeline_executor.hpp), with micro-batch groups of `microbatch_group_size`
  // (--microbatch-group-size-per-virtual-pipeline-stage; 0: the pipeline size).
  PipelineExecutor(GptModel& model, dist::Communicator& pipeline, std::int64_t microbatch_group_size = 0);

  // One training iteration of `microbatches` micro-batches with the 1F1B schedule: next_batch()
  // is called once per micro-batch, in order, at its forward; dropout_of(m) gives micro-batch m's
  // dropout streams; each micro-batch's loss is scaled by 1 / (its tokens · loss_divisor)
  // (GptModel::forward_backward's num_microbatches), or not at all with LossReduction::kSum,
  // then by loss_scale (--fp16's loss scaling).
  // The stage's gradients accumulate; the returned sums are the iteration's on every stage.
  // before_last_backward (may be empty) runs just before the stage's last backward of the
  // schedule, the one that finishes its gradients (--overlap-grad-reduce arms its hooks there).
  // Collective over the pipeline group.
  LossSum train(std::int64_t microbatches, const std::function<HostMicroBatch()>& next_batch,
                const std::function<DropoutRng(std::int64_t)>& dropout_of, std::int64_t loss_divisor,
                LossReduction reduction = LossReduction::kMicroBatchMean, float loss_scale = 1.0f,
                const std::function<void()>& before_last_backward = {});

  // Forward only, without dropout, over `microbatches` micro-batches: the loss sums on every
  // stage. Collective over the pipeline group.
  LossSum evaluate(std::int64_t microbatches, const std::function<HostMicroBatch()>& next_batch);

  // Called on the last stage with each micro-batch's loss sums, as its forward computes them
  // (--check-for-spiky-loss); empty: none.
  void set_loss_observer(std::function<void(const LossSum&)> observer) { loss_observer_ = std::move(observer); }

private:
  LossSum run(bool training, std::int64_t microbatches, const std::function<HostMicroBatch()>& next_batch,
              const std::function<DropoutRng(std::int64_t)>& dropout_of, std::int64_t loss_divisor,
              LossReduction reduction, float loss_scale, const std::function<void()>& before_last_backward);

  GptModel* model_;
  dist::Communicator* pipeline_;
  std::int64_t microbatch_group_size_;
  std::function<void(const LossSum&)> loss_observer_;
};

}  // namespace mgt
