// Runs a pipeline rank's interleaved schedule (interleaved_schedule.hpp) on the model's chunks,
// for PipelineExecutor when the model holds several chunks (PipelineStage::interleaved()).
//
// Each exchange of the schedule (one of Megatron's batched p2p calls) runs as two exchanges over
// the pipeline ring: first the forward direction (the output to the next rank while the input
// arrives from the previous one), then the backward direction (the input gradient to the previous
// rank while the output gradient arrives from the next one), each a send_recv when both halves
// are there, else a plain send or receive. Between two ranks, messages of one direction are
// posted and received in the same order, so blocking transports cannot deadlock and no message
// is taken for another: tests/train/test_interleaved_schedule.cpp checks it against a model of
// blocking transfers for many shapes. The ring's ends talk to each other: rank P − 1's last
// layer of chunk v feeds rank 0's chunk v + 1.
//
// Every micro-batch in flight on a chunk takes a slot of the model (an activation memory) when
// its input arrives or its forward starts, and gives it back after its input gradient has left
// (evaluation: after its output has left).
#pragma once
#include <cstdint>
#include <functional>

#include "dist/communicator.hpp"
#include "model/gpt_model.hpp"
#include "train/batch_prefetcher.hpp"

namespace mgt {

struct InterleavedRun {
  bool training = true;
  std::int64_t microbatches = 1;
  std::int64_t group_size = 0;  // --microbatch-group-size-per-virtual-pipeline-stage; 0: P
  std::int64_t loss_divisor = 1;
  LossReduction reduction = LossReduction::kMicroBatchMean;
  float loss_scale = 1.0f;
  // Called on the last stage with each micro-batch's loss sums (null or empty: none).
  const std::function<void(const LossSum&)>* loss_observer = nullptr;
};

// The loss sums of the micro-batches whose loss this rank computed (zero but on the last rank);
// the caller sums them over the pipeline group. Arguments as PipelineExecutor::train's.
LossSum run_interleaved_schedule(GptModel& model, dist::Communicator& pipeline, const InterleavedRun& run,
                                 const std::function<HostMicroBatch()>& next_batch,
                                 const std::function<DropoutRng(std::int64_t)>& dropout_of,
                                 const std::function<void()>& before_last_backward);

}  // namespace mgt
