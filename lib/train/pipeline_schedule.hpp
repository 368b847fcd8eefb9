// Megatron's non-interleaved pipeline schedule (megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_without_interleaving) as a pure function: the ordered actions of
// one stage for one iteration of M micro-batches. Stage r of p runs
//   warm-up    min(p − r − 1, M) forwards: receive the input, forward, send the output;
//   steady     for the remaining M − warm-up micro-batches, one forward then one backward (1F1B):
//              the output goes to the next stage in the same exchange that brings back the oldest
//              micro-batch's output gradient (send_forward_recv_backward), and the input gradient
//              goes back in the exchange that brings the next input (send_backward_recv_forward;
//              a plain send_backward after the last one);
//   cool-down  the warm-up micro-batches' backwards: receive the output gradient, backward, send
//              the input gradient.
// Evaluation runs forwards only (every micro-batch is warm-up). The first stage neither receives
// inputs nor sends input gradients, the last neither sends outputs nor receives output gradients:
// those halves of Megatron's p2p calls do nothing there and are left out, so a combined exchange
// becomes a plain send or receive, or disappears.
//
// Backwards run in micro-batch order, so a stage never has more than warm-up + 1 micro-batches in
// flight and micro-batch i can use activation slot i mod (warm-up + 1): when i arrives, i − warm-up
// − 1's backward is done (its input gradient may be leaving in the same exchange, from another
// buffer of the slot).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mgt {

enum class PipelineOp {
  kRecvForward,              // receive `microbatch`'s input from the previous stage
  kForward,                  // forward `microbatch`
  kSendForward,              // send `microbatch`'s output to the next stage
  kSendForwardRecvBackward,  // send `microbatch`'s output to the next stage while receiving
                             // `recv_microbatch`'s output gradient from it
  kBackward,                 // backward `microbatch`
  kSendBackward,             // send `microbatch`'s input gradient to the previous stage
  kSendBackwardRecvForward,  // send `microbatch`'s input gradient to the previous stage while
                             // receiving `recv_microbatch`'s input from it
  kRecvBackward,             // receive `microbatch`'s output gradient from the next stage
};

struct PipelineAction {
  PipelineOp op = PipelineOp::kForward;
  std::int64_t microbatch = 0;
  std::int64_t recv_microbatch = -1;  // the combined exchanges only

  bool operator==(const PipelineAction&) const = default;
};

// Megatron's num_warmup_microbatches for a stage: min(stages − stage − 1, microbatches).
std::int64_t pipeline_warmup_microbatches(std::int64_t stages, std::int64_t stage, std::int64_t microbatches);

// Activation slots a stage needs for one iteration: warm-up + 1, at most the micro-batches.
std::int64_t pipeline_slots(std::int64_t stages, std::int64_t stage, std::int64_t microbatches);

// The training (1F1B) actions of `stage` (0-based) of `stages`, for `microbatches` micro-batches.
// Throws mgt::Error when an argument is out of range.
std::vector<PipelineAction> one_forward_one_backward_schedule(std::int64_t stages, std::int64_t stage,
                                                              std::int64_t microbatches);

// Evaluation: receive, forward and send each micro-batch in turn.
std::vector<PipelineAction> forward_only_schedule(std::int64_t stages, std::int64_t stage, std::int64_t microbatches);

// "F3", "B0", "recv_fwd 1", "send_fwd 1 + recv_bwd 0", …: for messages and tests.
std::string to_string(const PipelineAction& action);
std::string to_string(const std::vector<PipelineAction>& actions);  // comma-separated

}  // namespace mgt
