#include "train/interleaved_pipeline_executor.hpp"

#include <map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "train/interleaved_schedule.hpp"

namespace mgt {

namespace {

using Key = std::pair<std::int64_t, std::int64_t>;  // chunk, micro-batch

Key key_of(const ChunkMicrobatch& c) { return {c.chunk, c.microbatch}; }

// The model's slots of the (chunk, micro-batch) pairs in flight; a slot is reused once free.
class SlotTable {
public:
  explicit SlotTable(bool training) : training_(training) {}

  std::int64_t take(const Key& k) {
    if (const auto it = held_.find(k); it != held_.end()) return slot_of(it->second);
    std::int64_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = next_++;
    }
    held_.emplace(k, index);
    return slot_of(index);
  }
  std::int64_t at(const Key& k) const {
    const auto it = held_.find(k);
    if (it == held_.end())
      throw Error("internal error: chunk " + std::to_string(k.first) + " micro-batch " + std::to_string(k.second) +
                  " holds no pipeline slot");
    return slot_of(it->second);
  }
  void release(const Key& k) {
    const auto it = held_.find(k);
    if (it == held_.end()) return;
    free_.push_back(it->second);
    held_.erase(it);
  }

private:
  std::int64_t slot_of(std::int64_t index) const { return training_ ? index : GptModel::kEvaluationSlot - index; }

  bool training_;
  std::map<Key, std::int64_t> held_;
  std::vector<std::int64_t> free_;
  std::int64_t next_ = 0;
};

}  // namespace

LossSum run_interleaved_schedule(GptModel& model, dist::Communicator& group, const InterleavedRun& run,
                                 const std::function<HostMicroBatch()>& next_batch,
                                 const std::function<DropoutRng(std::int64_t)>& dropout_of,
                                 const std::function<void()>& before_last_backward) {
  const PipelineStage& stage = model.pipeline_stage();
  const InterleavedShape shape{group.size(), stage.virtual_size, run.microbatches, run.group_size};
  const std::vector<InterleavedAction> actions = run.training ? interleaved_schedule(shape, group.rank())
                                                              : interleaved_forward_only_schedule(shape, group.rank());
  const int next = (group.rank() + 1) % group.size();
  const int previous = (group.rank() + group.size() - 1) % group.size();
  const std::int64_t last_chunk = stage.virtual_size - 1;

  // Micro-batches are read in order when first needed (a receive needs the shape) and dropped
  // after the forward of their last chunk.
  std::map<std::int64_t, HostMicroBatch> fetched;
  std::int64_t next_to_fetch = 0;
  const auto batch = [&](std::int64_t mb) -> const HostMicroBatch& {
    while (next_to_fetch <= mb) fetched.emplace(next_to_fetch++, next_batch());
    return fetched.at(mb);
  };
  SlotTable slots(run.training);
  const auto input = [&](const ChunkMicrobatch& c) {
    return model.stage_input(slots.take(key_of(c)), batch(c.microbatch).view(), c.chunk);
  };

  std::size_t last_backward = actions.size();
  for (std::size_t i = 0; i < actions.size(); ++i)
    if (actions[i].op == InterleavedOp::kBackward) last_backward = i;

  LossSum sums;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const InterleavedAction& a = actions[i];
    switch (a.op) {
      case InterleavedOp::kForward: {
        const ChunkMicrobatch t = a.target;
        const DropoutRng rng = run.training ? dropout_of(t.microbatch) : DropoutRng{};
        const LossSum s = model.stage_forward(slots.take(key_of(t)), batch(t.microbatch).view(), rng, run.loss_divisor,
                                              run.reduction, run.loss_scale, t.chunk);
        sums.loss_sum += s.loss_sum;
        sums.token_count += s.token_count;
        if (run.loss_observer && *run.loss_observer && stage.is_last() && t.chunk == last_chunk) (*run.loss_observer)(s);
        if (t.chunk == last_chunk) fetched.erase(t.microbatch);
        // Evaluation keeps nothing once the output has left (the exchange frees the slot); the
        // last virtual stage's output is the loss, which leaves nowhere.
        if (!run.training && stage.is_last() && t.chunk == last_chunk) slots.release(key_of(t));
        break;
      }
      case InterleavedOp::kBackward:
        if (i == last_backward && before_last_backward) before_last_backward();
        model.stage_backward(slots.at(key_of(a.target)));
        // The first virtual stage sends no input gradient: its slot is free now.
        if (stage.is_first() && a.target.chunk == 0) slots.release(key_of(a.target));
        break;
      case InterleavedOp::kExchange: {
        // No synchronisation around the transfers: the pipeline group orders them with the
        // backend's work (communicator.hpp).
        if (a.send_forward.present() && a.recv_forward.present()) {
          group.send_recv(model.stage_output(slots.at(key_of(a.send_forward))), next, input(a.recv_forward), previous);
        } else if (a.send_forward.present()) {
          group.send(model.stage_output(slots.at(key_of(a.send_forward))), next);
        } else if (a.recv_forward.present()) {
          group.recv(input(a.recv_forward), previous);
        }
        if (a.send_backward.present() && a.recv_backward.present()) {
          group.send_recv(model.stage_input_grad(slots.at(key_of(a.send_backward))), previous,
                          model.stage_output_grad(slots.at(key_of(a.recv_backward))), next);
        } else if (a.send_backward.present()) {
          group.send(model.stage_input_grad(slots.at(key_of(a.send_backward))), previous);
        } else if (a.recv_backward.present()) {
          group.recv(model.stage_output_grad(slots.at(key_of(a.recv_backward))), next);
        }
        if (!run.training && a.send_forward.present()) slots.release(key_of(a.send_forward));
        if (a.send_backward.present()) slots.release(key_of(a.send_backward));
        break;
      }
    }
  }
  return sums;
}

}  // namespace mgt
