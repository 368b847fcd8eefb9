// The 1F1B pipeline schedule: each stage's actions against sequences derived by hand from
// Megatron's forward_backward_pipelining_without_interleaving, then, for many pipeline sizes and
// micro-batch counts, every stage's schedule run together against a model of blocking point-to-
// point communication (a send completes only when the peer's matching receive is posted; the two
// halves of an exchange are posted together), which must finish without deadlock, pair every
// message with the right micro-batch, and never reuse an activation slot still in flight.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/pipeline_schedule.hpp"

using namespace mgt;

namespace {

std::string schedule(std::int64_t stages, std::int64_t stage, std::int64_t microbatches) {
  return to_string(one_forward_one_backward_schedule(stages, stage, microbatches));
}

// One half of a point-to-point exchange: this stage sends to or receives from `peer` the tensor
// of micro-batch `mb` (activations travel forward, gradients backward, so a direction has one
// kind).
struct Half {
  bool send = false;
  std::int64_t peer = 0;
  std::int64_t mb = 0;
};

std::vector<Half> halves(const PipelineAction& a, std::int64_t stage) {
  const std::int64_t prev = stage - 1;
  const std::int64_t next = stage + 1;
  switch (a.op) {
    case PipelineOp::kRecvForward: return {{false, prev, a.microbatch}};
    case PipelineOp::kSendForward: return {{true, next, a.microbatch}};
    case PipelineOp::kSendForwardRecvBackward: return {{true, next, a.microbatch}, {false, next, a.recv_microbatch}};
    case PipelineOp::kSendBackward: return {{true, prev, a.microbatch}};
    case PipelineOp::kSendBackwardRecvForward: return {{true, prev, a.microbatch}, {false, prev, a.recv_microbatch}};
    case PipelineOp::kRecvBackward: return {{false, next, a.microbatch}};
    case PipelineOp::kForward:
    case PipelineOp::kBackward: break;
  }
  return {};
}

// Runs every stage's schedule together; returns "" or what went wrong.
std::string simulate(std::int64_t stages, std::int64_t microbatches) {
  std::vector<std::vector<PipelineAction>> programs;
  for (std::int64_t r = 0; r < stages; ++r) programs.push_back(one_forward_one_backward_schedule(stages, r, microbatches));
  std::vector<size_t> pc(static_cast<size_t>(stages), 0);
  std::vector<std::vector<Half>> pending(static_cast<size_t>(stages));
  std::vector<bool> started(static_cast<size_t>(stages), false);
  // Per stage: which micro-batch holds each slot (−1: free), what was received, what is done.
  std::vector<std::map<std::int64_t, std::int64_t>> slot_holder(static_cast<size_t>(stages));
  std::vector<std::map<std::int64_t, int>> forwards(static_cast<size_t>(stages));
  std::vector<std::map<std::int64_t, int>> backwards(static_cast<size_t>(stages));
  std::vector<std::map<std::int64_t, bool>> have_input(static_cast<size_t>(stages));
  std::vector<std::map<std::int64_t, bool>> have_output_grad(static_cast<size_t>(stages));
  std::vector<std::int64_t> next_backward(static_cast<size_t>(stages), 0);
  const std::string where = "PP=" + std::to_string(stages) + ", M=" + std::to_string(microbatches) + ": ";

  // Takes the slot of micro-batch mb on stage r, or says whom it still belongs to.
  auto take_slot = [&](std::int64_t r, std::int64_t mb) -> std::string {
    const std::int64_t slots = pipeline_slots(stages, r, microbatches);
    auto& holder = slot_holder[static_cast<size_t>(r)];
    const std::int64_t slot = mb % slots;
    if (holder.count(slot) && holder[slot] != mb && holder[slot] >= 0)
      return where + "stage " + std::to_string(r) + " puts micro-batch " + std::to_string(mb) + " in slot " +
             std::to_string(slot) + " while micro-batch " + std::to_string(holder[slot]) + " is in flight";
    holder[slot] = mb;
    return "";
  };

  bool progress = true;
  while (progress) {
    progress = false;
    for (std::int64_t r = 0; r < stages; ++r) {
      const auto ru = static_cast<size_t>(r);
      if (pc[ru] == programs[ru].size()) continue;
      const PipelineAction& a = programs[ru][pc[ru]];
      if (a.op == PipelineOp::kForward) {
        if (r > 0 && !have_input[ru][a.microbatch]) return where + "stage " + std::to_string(r) + " forwards " +
                                                           std::to_string(a.microbatch) + " before its input";
        if (r == 0) {
          if (std::string e = take_slot(r, a.microbatch); !e.empty()) return e;
        }
        ++forwards[ru][a.microbatch];
        ++pc[ru];
        progress = true;
        continue;
      }
      if (a.op == PipelineOp::kBackward) {
        if (forwards[ru][a.microbatch] != 1) return where + "backward before forward";
        if (r < stages - 1 && !have_output_grad[ru][a.microbatch]) return where + "backward before its gradient";
        if (a.microbatch != next_backward[ru]++) return where + "backwards out of order";
        ++backwards[ru][a.microbatch];
        slot_holder[ru][a.microbatch % pipeline_slots(stages, r, microbatches)] = -1;
        ++pc[ru];
        progress = true;
        continue;
      }
      if (!started[ru]) {
        pending[ru] = halves(a, r);
        started[ru] = true;
        for (const Half& h : pending[ru]) {
          if (h.peer < 0 || h.peer >= stages) return where + "stage " + std::to_string(r) + " talks to no stage";
          // A receive of an input takes the micro-batch's slot when it is posted.
          if (!h.send && h.peer == r - 1) {
            if (std::string e = take_slot(r, h.mb); !e.empty()) return e;
          }
        }
      }
      // Match each pending half with the peer's pending halves of its current action.
      for (size_t i = 0; i < pending[ru].size();) {
        const Half h = pending[ru][i];
        const auto pu = static_cast<size_t>(h.peer);
        bool matched = false;
        if (started[pu]) {
          for (size_t j = 0; j < pending[pu].size(); ++j) {
            const Half& o = pending[pu][j];
            if (o.peer != r || o.send == h.send) continue;
            if (o.mb != h.mb)
              return where + "stage " + std::to_string(r) + " and stage " + std::to_string(h.peer) +
                     " exchange micro-batches " + std::to_string(h.mb) + " and " + std::to_string(o.mb);
            // The receiver now holds the tensor.
            const Half& recv = h.send ? o : h;
            const std::int64_t receiver = h.send ? h.peer : r;
            if (recv.peer == receiver - 1) have_input[static_cast<size_t>(receiver)][recv.mb] = true;
            else have_output_grad[static_cast<size_t>(receiver)][recv.mb] = true;
            pending[pu].erase(pending[pu].begin() + static_cast<std::ptrdiff_t>(j));
            matched = true;
            break;
          }
        }
        if (matched) {
          pending[ru].erase(pending[ru].begin() + static_cast<std::ptrdiff_t>(i));
          progress = true;
        } else {
          ++i;
        }
      }
      // A peer whose halves are all matched finishes its action when its turn comes.
      if (pending[ru].empty()) {
        started[ru] = false;
        ++pc[ru];
        progress = true;
      }
    }
  }
  for (std::int64_t r = 0; r < stages; ++r) {
    const auto ru = static_cast<size_t>(r);
    if (pc[ru] != programs[ru].size())
      return where + "deadlock: stage " + std::to_string(r) + " waits in " + to_string(programs[ru][pc[ru]]);
    for (std::int64_t mb = 0; mb < microbatches; ++mb)
      if (forwards[ru][mb] != 1 || backwards[ru][mb] != 1)
        return where + "stage " + std::to_string(r) + " does not run micro-batch " + std::to_string(mb) + " once";
  }
  return "";
}

}  // namespace

TEST_CASE("pipeline schedule: warm-up counts are Megatron's", "[train][pipeline]") {
  CHECK(pipeline_warmup_microbatches(4, 0, 8) == 3);
  CHECK(pipeline_warmup_microbatches(4, 3, 8) == 0);
  CHECK(pipeline_warmup_microbatches(4, 0, 2) == 2);
  CHECK(pipeline_warmup_microbatches(1, 0, 5) == 0);
  CHECK(pipeline_slots(4, 0, 8) == 4);
  CHECK(pipeline_slots(4, 0, 2) == 2);
  CHECK(pipeline_slots(4, 3, 8) == 1);
  CHECK_THROWS_AS(one_forward_one_backward_schedule(2, 2, 4), Error);
  CHECK_THROWS_AS(one_forward_one_backward_schedule(2, 0, 0), Error);
}

TEST_CASE("pipeline schedule: one stage alternates forward and backward", "[train][pipeline]") {
  CHECK(schedule(1, 0, 3) == "F0, B0, F1, B1, F2, B2");
}

TEST_CASE("pipeline schedule: two stages, four micro-batches", "[train][pipeline]") {
  CHECK(schedule(2, 0, 4) ==
        "F0, send_fwd 0, "
        "F1, send_fwd 1 + recv_bwd 0, B0, "
        "F2, send_fwd 2 + recv_bwd 1, B1, "
        "F3, send_fwd 3 + recv_bwd 2, B2, "
        "recv_bwd 3, B3");
  CHECK(schedule(2, 1, 4) ==
        "recv_fwd 0, "
        "F0, B0, send_bwd 0 + recv_fwd 1, "
        "F1, B1, send_bwd 1 + recv_fwd 2, "
        "F2, B2, send_bwd 2 + recv_fwd 3, "
        "F3, B3, send_bwd 3");
}

TEST_CASE("pipeline schedule: four stages, six micro-batches, a middle stage", "[train][pipeline]") {
  CHECK(schedule(4, 1, 6) ==
        "recv_fwd 0, F0, send_fwd 0, recv_fwd 1, F1, send_fwd 1, recv_fwd 2, "
        "F2, send_fwd 2 + recv_bwd 0, B0, send_bwd 0 + recv_fwd 3, "
        "F3, send_fwd 3 + recv_bwd 1, B1, send_bwd 1 + recv_fwd 4, "
        "F4, send_fwd 4 + recv_bwd 2, B2, send_bwd 2 + recv_fwd 5, "
        "F5, send_fwd 5 + recv_bwd 3, B3, send_bwd 3, "
        "recv_bwd 4, B4, send_bwd 4, recv_bwd 5, B5, send_bwd 5");
  CHECK(schedule(4, 0, 6) ==
        "F0, send_fwd 0, F1, send_fwd 1, F2, send_fwd 2, "
        "F3, send_fwd 3 + recv_bwd 0, B0, "
        "F4, send_fwd 4 + recv_bwd 1, B1, "
        "F5, send_fwd 5 + recv_bwd 2, B2, "
        "recv_bwd 3, B3, recv_bwd 4, B4, recv_bwd 5, B5");
  CHECK(schedule(4, 3, 6) ==
        "recv_fwd 0, F0, B0, send_bwd 0 + recv_fwd 1, F1, B1, send_bwd 1 + recv_fwd 2, "
        "F2, B2, send_bwd 2 + recv_fwd 3, F3, B3, send_bwd 3 + recv_fwd 4, "
        "F4, B4, send_bwd 4 + recv_fwd 5, F5, B5, send_bwd 5");
}

TEST_CASE("pipeline schedule: fewer micro-batches than stages", "[train][pipeline]") {
  // Warm-up takes every micro-batch on the early stages: no steady phase there.
  CHECK(schedule(4, 0, 2) == "F0, send_fwd 0, F1, send_fwd 1, recv_bwd 0, B0, recv_bwd 1, B1");
  CHECK(schedule(4, 1, 2) ==
        "recv_fwd 0, F0, send_fwd 0, recv_fwd 1, F1, send_fwd 1, "
        "recv_bwd 0, B0, send_bwd 0, recv_bwd 1, B1, send_bwd 1");
  CHECK(schedule(4, 2, 2) ==
        "recv_fwd 0, F0, send_fwd 0, recv_fwd 1, "
        "F1, send_fwd 1 + recv_bwd 0, B0, send_bwd 0, "
        "recv_bwd 1, B1, send_bwd 1");
  CHECK(schedule(4, 3, 2) == "recv_fwd 0, F0, B0, send_bwd 0 + recv_fwd 1, F1, B1, send_bwd 1");
  CHECK(schedule(3, 0, 1) == "F0, send_fwd 0, recv_bwd 0, B0");
  CHECK(schedule(3, 1, 1) == "recv_fwd 0, F0, send_fwd 0, recv_bwd 0, B0, send_bwd 0");
  CHECK(schedule(3, 2, 1) == "recv_fwd 0, F0, B0, send_bwd 0");
}

TEST_CASE("pipeline schedule: forward only", "[train][pipeline]") {
  CHECK(to_string(forward_only_schedule(2, 0, 2)) == "F0, send_fwd 0, F1, send_fwd 1");
  CHECK(to_string(forward_only_schedule(3, 1, 2)) == "recv_fwd 0, F0, send_fwd 0, recv_fwd 1, F1, send_fwd 1");
  CHECK(to_string(forward_only_schedule(2, 1, 2)) == "recv_fwd 0, F0, recv_fwd 1, F1");
  CHECK(to_string(forward_only_schedule(1, 0, 2)) == "F0, F1");
}

TEST_CASE("pipeline schedule: all stages together finish under blocking communication", "[train][pipeline]") {
  for (std::int64_t stages = 1; stages <= 6; ++stages) {
    for (std::int64_t microbatches = 1; microbatches <= 10; ++microbatches) {
      INFO("PP=" << stages << " M=" << microbatches);
      CHECK(simulate(stages, microbatches) == "");
    }
  }
}
