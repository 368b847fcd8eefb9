#include "train/pipeline_schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mgt {

namespace {

void check_arguments(std::int64_t stages, std::int64_t stage, std::int64_t microbatches) {
  if (stages < 1 || stage < 0 || stage >= stages || microbatches < 1)
    throw Error("pipeline schedule: stage " + std::to_string(stage) + " of " + std::to_string(stages) + " with " +
                std::to_string(microbatches) + " micro-batches is out of range");
}

// Appends the actions of one stage, leaving out the communication halves that Megatron's p2p
// calls skip on the first and last stages.
class ScheduleBuilder {
public:
  ScheduleBuilder(std::int64_t stages, std::int64_t stage) : first_(stage == 0), last_(stage == stages - 1) {}

  void recv_forward(std::int64_t mb) {
    if (!first_) add({PipelineOp::kRecvForward, mb});
  }
  void forward(std::int64_t mb) { add({PipelineOp::kForward, mb}); }
  void send_forward(std::int64_t mb) {
    if (!last_) add({PipelineOp::kSendForward, mb});
  }
  void backward(std::int64_t mb) { add({PipelineOp::kBackward, mb}); }
  void recv_backward(std::int64_t mb) {
    if (!last_) add({PipelineOp::kRecvBackward, mb});
  }
  void send_backward(std::int64_t mb) {
    if (!first_) add({PipelineOp::kSendBackward, mb});
  }
  // Both halves talk to the next stage: nothing to do on the last.
  void send_forward_recv_backward(std::int64_t sent, std::int64_t received) {
    if (!last_) add({PipelineOp::kSendForwardRecvBackward, sent, received});
  }
  // Both halves talk to the previous stage: nothing to do on the first.
  void send_backward_recv_forward(std::int64_t sent, std::int64_t received) {
    if (!first_) add({PipelineOp::kSendBackwardRecvForward, sent, received});
  }

  std::vector<PipelineAction> finish() { return std::move(actions_); }

private:
  void add(PipelineAction a) { actions_.push_back(a); }

  bool first_;
  bool last_;
  std::vector<PipelineAction> actions_;
};

}  // namespace

std::int64_t pipeline_warmup_microbatches(std::int64_t stages, std::int64_t stage, std::int64_t microbatches) {
  check_arguments(stages, stage, microbatches);
  return std::min(stages - stage - 1, microbatches);
}

std::int64_t pipeline_slots(std::int64_t stages, std::int64_t stage, std::int64_t microbatches) {
  return std::min(pipeline_warmup_microbatches(stages, stage, microbatches) + 1, microbatches);
}

std::vector<PipelineAction> one_forward_one_backward_schedule(std::int64_t stages, std::int64_t stage,
                                                              std::int64_t microbatches) {
  const std::int64_t warmup = pipeline_warmup_microbatches(stages, stage, microbatches);
  const std::int64_t remaining = microbatches - warmup;
  ScheduleBuilder s(stages, stage);
  for (std::int64_t i = 0; i < warmup; ++i) {
    s.recv_forward(i);
    s.forward(i);
    s.send_forward(i);
  }
  if (remaining > 0) s.recv_forward(warmup);
  for (std::int64_t i = 0; i < remaining; ++i) {
    const std::int64_t f = warmup + i;  // the forward of this step
    const std::int64_t b = i;           // the backward of this step: the oldest in flight
    s.forward(f);
    s.send_forward_recv_backward(f, b);
    s.backward(b);
    if (i == remaining - 1) s.send_backward(b);
    else s.send_backward_recv_forward(b, f + 1);
  }
  for (std::int64_t i = 0; i < warmup; ++i) {
    const std::int64_t b = remaining + i;
    s.recv_backward(b);
    s.backward(b);
    s.send_backward(b);
  }
  return s.finish();
}

std::vector<PipelineAction> forward_only_schedule(std::int64_t stages, std::int64_t stage, std::int64_t microbatches) {
  check_arguments(stages, stage, microbatches);
  ScheduleBuilder s(stages, stage);
  for (std::int64_t i = 0; i < microbatches; ++i) {
    s.recv_forward(i);
    s.forward(i);
    s.send_forward(i);
  }
  return s.finish();
}

std::string to_string(const PipelineAction& a) {
  const std::string mb = std::to_string(a.microbatch);
  const std::string other = std::to_string(a.recv_microbatch);
  switch (a.op) {
    case PipelineOp::kRecvForward: return "recv_fwd " + mb;
    case PipelineOp::kForward: return "F" + mb;
    case PipelineOp::kSendForward: return "send_fwd " + mb;
    case PipelineOp::kSendForwardRecvBackward: return "send_fwd " + mb + " + recv_bwd " + other;
    case PipelineOp::kBackward: return "B" + mb;
    case PipelineOp::kSendBackward: return "send_bwd " + mb;
    case PipelineOp::kSendBackwardRecvForward: return "send_bwd " + mb + " + recv_fwd " + other;
    case PipelineOp::kRecvBackward: return "recv_bwd " + mb;
  }
  return "?";
}

std::string to_string(const std::vector<PipelineAction>& actions) {
  std::string text;
  for (const PipelineAction& a : actions) text += (text.empty() ? "" : ", ") + to_string(a);
  return text;
}

}  // namespace mgt
