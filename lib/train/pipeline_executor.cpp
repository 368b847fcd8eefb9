#include "train/pipeline_executor.hpp"

#include <map>
#include <span>

#include "core/error.hpp"
#include "train/interleaved_pipeline_executor.hpp"
#include "train/pipeline_schedule.hpp"

namespace mgt {

PipelineExecutor::PipelineExecutor(GptModel& model, dist::Communicator& pipeline, std::int64_t microbatch_group_size)
    : model_(&model), pipeline_(&pipeline), microbatch_group_size_(microbatch_group_size) {
  const PipelineStage& stage = model.pipeline_stage();
  if (pipeline.size() != stage.size || pipeline.rank() != stage.rank)
    throw Error("internal error: pipeline stage " + std::to_string(stage.rank) + " of " + std::to_string(stage.size) +
                " run over " + pipeline.description() + " as its rank " + std::to_string(pipeline.rank()));
}

LossSum PipelineExecutor::train(std::int64_t microbatches, const std::function<HostMicroBatch()>& next_batch,
                                const std::function<DropoutRng(std::int64_t)>& dropout_of,
                                std::int64_t loss_divisor, LossReduction reduction, float loss_scale,
                                const std::function<void()>& before_last_backward) {
  return run(true, microbatches, next_batch, dropout_of, loss_divisor, reduction, loss_scale, before_last_backward);
}

LossSum PipelineExecutor::evaluate(std::int64_t microbatches, const std::function<HostMicroBatch()>& next_batch) {
  return run(false, microbatches, next_batch, {}, microbatches, LossReduction::kMicroBatchMean, 1.0f, {});
}

LossSum PipelineExecutor::run(bool training, std::int64_t microbatches,
                              const std::function<HostMicroBatch()>& next_batch,
                              const std::function<DropoutRng(std::int64_t)>& dropout_of,
                              std::int64_t loss_divisor, LossReduction reduction, float loss_scale,
                              const std::function<void()>& before_last_backward) {
  GptModel& model = *model_;
  dist::Communicator& group = *pipeline_;
  if (model.pipeline_stage().interleaved()) {
    const InterleavedRun settings{training,  microbatches, microbatch_group_size_, loss_divisor,
                                  reduction, loss_scale,   &loss_observer_};
    const LossSum s = run_interleaved_schedule(model, group, settings, next_batch, dropout_of, before_last_backward);
    double sums[2] = {s.loss_sum, s.token_count};
    group.all_reduce(std::span<double>(sums), dist::ReduceOp::Sum);
    return {sums[0], sums[1]};
  }
  const std::int64_t stages = group.size();
  const std::int64_t stage = group.rank();
  const int previous = static_cast<int>(stage) - 1;
  const int next = static_cast<int>(stage) + 1;
  const std::vector<PipelineAction> actions = training ? one_forward_one_backward_schedule(stages, stage, microbatches)
                                                       : forward_only_schedule(stages, stage, microbatches);
  const std::int64_t slots = training ? pipeline_slots(stages, stage, microbatches) : 1;
  const auto slot_of = [&](std::int64_t mb) { return training ? mb % slots : GptModel::kEvaluationSlot; };

  // Micro-batches are read in order when first needed (a receive needs the shape before the
  // forward needs the data) and dropped after their forward.
  std::map<std::int64_t, HostMicroBatch> fetched;
  std::int64_t next_to_fetch = 0;
  const auto batch = [&](std::int64_t mb) -> const HostMicroBatch& {
    while (next_to_fetch <= mb) fetched.emplace(next_to_fetch++, next_batch());
    return fetched.at(mb);
  };
  const auto input = [&](std::int64_t mb) { return model.stage_input(slot_of(mb), batch(mb).view()); };

  std::size_t last_backward = actions.size();
  for (std::size_t i = 0; i < actions.size(); ++i)
    if (actions[i].op == PipelineOp::kBackward) last_backward = i;

  double sums[2] = {0.0, 0.0};
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    const std::int64_t mb = a.microbatch;
    // No synchronisation around the transfers: the pipeline group orders them with the
    // backend's work (communicator.hpp), MPI by staging through the backend's own copies, NCCL
    // by queueing them on the backend's stream.
    switch (a.op) {
      case PipelineOp::kRecvForward:
        group.recv(input(mb), previous);
        break;
      case PipelineOp::kForward: {
        const DropoutRng rng = training ? dropout_of(mb) : DropoutRng{};
        const LossSum s = model.stage_forward(slot_of(mb), batch(mb).view(), rng, loss_divisor, reduction, loss_scale);
        sums[0] += s.loss_sum;
        sums[1] += s.token_count;
        if (loss_observer_ && model.pipeline_stage().is_last()) loss_observer_(s);
        fetched.erase(mb);
        break;
      }
      case PipelineOp::kSendForward:
        group.send(model.stage_output(slot_of(mb)), next);
        break;
      case PipelineOp::kSendForwardRecvBackward:
        group.send_recv(model.stage_output(slot_of(mb)), next, model.stage_output_grad(slot_of(a.recv_microbatch)),
                        next);
        break;
      case PipelineOp::kBackward:
        if (i == last_backward && before_last_backward) before_last_backward();
        model.stage_backward(slot_of(mb));
        break;
      case PipelineOp::kSendBackward:
        group.send(model.stage_input_grad(slot_of(mb)), previous);
        break;
      case PipelineOp::kSendBackwardRecvForward:
        group.send_recv(model.stage_input_grad(slot_of(mb)), previous, input(a.recv_microbatch), previous);
        break;
      case PipelineOp::kRecvBackward:
        group.recv(model.stage_output_grad(slot_of(mb)), next);
        break;
    }
  }
  if (stages > 1) group.all_reduce(std::span<double>(sums), dist::ReduceOp::Sum);
  return {sums[0], sums[1]};
}

}  // namespace mgt
