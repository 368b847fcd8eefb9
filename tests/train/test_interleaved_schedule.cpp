// The interleaved 1F1B schedule: the forward order, the warm-up counts and each rank's
// (chunk, micro-batch) sequence against values worked out by hand from Megatron's
// forward_backward_pipelining_with_interleaving (megatron/core/pipeline_parallel/schedules.py);
// its shape checks; then, for many shapes, every rank's schedule run together the way
// InterleavedPipelineExecutor runs it (each exchange as a forward-direction send_recv then a
// backward-direction one, blocking: a send completes only when the peer's receive is posted),
// which must finish without deadlock, deliver every tensor to the (chunk, micro-batch) that
// expects it, and run each forward after its input and each backward after its output gradient.
#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "train/interleaved_schedule.hpp"

using namespace mgt;

namespace {

std::string order_of(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t g, std::int64_t rank) {
  return compute_order(interleaved_schedule({p, v, m, g}, rank));
}

// One blocking call of the executor: its sends and receives, each naming the tensor.
struct Message {
  bool forward = true;  // activation (forward) or gradient (backward)
  ChunkMicrobatch what;  // on the sender: its chunk; on the receiver: the chunk that expects it
};
struct Half {
  bool send = false;
  std::int64_t peer = 0;
  Message message;
};
struct Step {
  const InterleavedAction* compute = nullptr;  // a forward or backward, else communication
  std::vector<Half> halves;
};

// The executor's split of an exchange: forward direction (to next, from previous), then backward.
std::vector<Step> steps_of(const std::vector<InterleavedAction>& actions, std::int64_t p, std::int64_t rank) {
  const std::int64_t next = (rank + 1) % p;
  const std::int64_t prev = (rank + p - 1) % p;
  std::vector<Step> steps;
  for (const InterleavedAction& a : actions) {
    if (a.op != InterleavedOp::kExchange) {
      steps.push_back({&a, {}});
      continue;
    }
    Step forward, backward;
    if (a.send_forward.present()) forward.halves.push_back({true, next, {true, a.send_forward}});
    if (a.recv_forward.present()) forward.halves.push_back({false, prev, {true, a.recv_forward}});
    if (a.send_backward.present()) backward.halves.push_back({true, prev, {false, a.send_backward}});
    if (a.recv_backward.present()) backward.halves.push_back({false, next, {false, a.recv_backward}});
    if (!forward.halves.empty()) steps.push_back(forward);
    if (!backward.halves.empty()) steps.push_back(backward);
  }
  return steps;
}

// What virtual stage the receiver's chunk is fed by: the sender's (rank, chunk) for a tensor
// received by (rank, chunk) going forward, or going backward.
std::pair<std::int64_t, std::int64_t> feeder(std::int64_t p, std::int64_t rank, std::int64_t chunk, bool forward) {
  const std::int64_t stage = chunk * p + rank + (forward ? -1 : 1);
  return {stage % p, stage / p};
}

// Runs every rank's steps together; "" or what went wrong.
std::string simulate(const InterleavedShape& shape, bool training) {
  const std::int64_t p = shape.pipeline_size;
  const std::int64_t v = shape.virtual_size;
  const std::string where = "P=" + std::to_string(p) + " V=" + std::to_string(v) + " M=" +
                            std::to_string(shape.microbatches) + " G=" + std::to_string(shape.group()) +
                            (training ? "" : " forward-only") + ": ";
  std::vector<std::vector<InterleavedAction>> actions;
  std::vector<std::vector<Step>> programs;
  for (std::int64_t r = 0; r < p; ++r) {
    actions.push_back(training ? interleaved_schedule(shape, r) : interleaved_forward_only_schedule(shape, r));
  }
  for (std::int64_t r = 0; r < p; ++r) programs.push_back(steps_of(actions[static_cast<size_t>(r)], p, r));
  // Messages travel in order per (sender, receiver) pair, as MPI's are matched.
  std::map<std::pair<std::int64_t, std::int64_t>, std::deque<std::pair<Message, std::int64_t /*sender*/>>> channels;
  std::vector<size_t> pc(static_cast<size_t>(p), 0);
  std::vector<std::vector<bool>> done(static_cast<size_t>(p));
  std::vector<bool> posted(static_cast<size_t>(p), false);
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // rank, chunk, micro-batch
  std::set<Key> inputs, grads, forwarded, backwarded;

  bool progress = true;
  while (progress) {
    progress = false;
    for (std::int64_t r = 0; r < p; ++r) {
      const auto ru = static_cast<size_t>(r);
      if (pc[ru] == programs[ru].size()) continue;
      const Step& s = programs[ru][pc[ru]];
      if (s.compute != nullptr) {
        const ChunkMicrobatch t = s.compute->target;
        const Key key{r, t.chunk, t.microbatch};
        if (s.compute->op == InterleavedOp::kForward) {
          if (!(r == 0 && t.chunk == 0) && !inputs.count(key)) return where + "rank " + std::to_string(r) + " forwards before its input";
          forwarded.insert(key);
        } else {
          if (!forwarded.count(key)) return where + "backward before forward";
          if (!(r == p - 1 && t.chunk == v - 1) && !grads.count(key)) return where + "backward before its gradient";
          backwarded.insert(key);
        }
        ++pc[ru];
        progress = true;
        continue;
      }
      if (!posted[ru]) {
        posted[ru] = true;
        done[ru].assign(s.halves.size(), false);
        for (size_t i = 0; i < s.halves.size(); ++i)
          if (s.halves[i].send) channels[{r, s.halves[i].peer}].push_back({s.halves[i].message, r});
        progress = true;
      }
      // Receives take the channel's oldest message once it is there.
      for (size_t i = 0; i < s.halves.size(); ++i) {
        const Half& h = s.halves[i];
        if (h.send || done[ru][i]) continue;
        auto& channel = channels[{h.peer, r}];
        if (channel.empty()) continue;
        const Message got = channel.front().first;
        channel.pop_front();
        if (got.forward != h.message.forward) return where + "rank " + std::to_string(r) + " receives a gradient for an activation or the other way";
        const auto [from_rank, from_chunk] = feeder(p, r, h.message.what.chunk, h.message.forward);
        if (from_rank != h.peer || from_chunk != got.what.chunk || got.what.microbatch != h.message.what.microbatch)
          return where + "rank " + std::to_string(r) + " chunk " + std::to_string(h.message.what.chunk) +
                 " micro-batch " + std::to_string(h.message.what.microbatch) + " receives chunk " +
                 std::to_string(got.what.chunk) + " micro-batch " + std::to_string(got.what.microbatch);
        (h.message.forward ? inputs : grads).insert({r, h.message.what.chunk, h.message.what.microbatch});
        done[ru][i] = true;
        progress = true;
      }
      // A send is complete once its message has been taken (the rendezvous).
      for (size_t i = 0; i < s.halves.size(); ++i) {
        const Half& h = s.halves[i];
        if (!h.send || done[ru][i]) continue;
        bool waiting = false;
        for (const auto& [m, sender] : channels[{r, h.peer}])
          if (sender == r && m.forward == h.message.forward && m.what == h.message.what) waiting = true;
        if (!waiting) {
          done[ru][i] = true;
          progress = true;
        }
      }
      bool all = true;
      for (bool d : done[ru]) all = all && d;
      if (all) {
        ++pc[ru];
        posted[ru] = false;
        progress = true;
      }
    }
  }
  for (std::int64_t r = 0; r < p; ++r)
    if (pc[static_cast<size_t>(r)] != programs[static_cast<size_t>(r)].size())
      return where + "deadlock: rank " + std::to_string(r) + " stops at step " + std::to_string(pc[static_cast<size_t>(r)]);
  for (const auto& [key, channel] : channels)
    if (!channel.empty()) return where + "a message is never received";
  const auto expected = static_cast<size_t>(p * v * shape.microbatches);
  if (forwarded.size() != expected) return where + "not every forward ran";
  if (training && backwarded.size() != expected) return where + "not every backward ran";
  return "";
}

}  // namespace

TEST_CASE("interleaved schedule: Megatron's forward order (get_schedule_table)", "[train][pipeline]") {
  // schedules.py's own example: PP=2, N=3, M=5, VP=2.
  std::string text;
  for (const ChunkMicrobatch& c : interleaved_forward_order({2, 2, 5, 3}))
    text += std::to_string(c.microbatch) + ":" + std::to_string(c.chunk) + " ";
  CHECK(text == "0:0 1:0 2:0 0:1 1:1 2:1 3:0 4:0 3:1 4:1 ");
}

TEST_CASE("interleaved schedule: warm-up counts of get_pp_rank_microbatches", "[train][pipeline]") {
  // (P − p − 1)·2 + (V − 1)·G, at most M·V.
  CHECK(interleaved_warmup_microbatches({4, 2, 8, 0}, 0) == 10);
  CHECK(interleaved_warmup_microbatches({4, 2, 8, 0}, 3) == 4);
  CHECK(interleaved_warmup_microbatches({2, 2, 4, 0}, 0) == 4);
  CHECK(interleaved_warmup_microbatches({2, 2, 4, 0}, 1) == 2);
  CHECK(interleaved_warmup_microbatches({4, 2, 4, 0}, 0) == 8);  // every virtual micro-batch
  CHECK(interleaved_warmup_microbatches({2, 3, 6, 3}, 0) == 8);
}

TEST_CASE("interleaved schedule: each rank's order against Megatron's", "[train][pipeline]") {
  // PP=2, V=2, M=4 (G=2): schedules.py's picture "rank 0 | 0 1 0 1 2 3 2 3" for the forwards;
  // rank 0 warms up with 4 forwards, rank 1 with 2.
  CHECK(order_of(2, 2, 4, 0, 0) ==
        "F0.0, F0.1, F1.0, F1.1, F0.2, B1.0, F0.3, B1.1, F1.2, B0.0, F1.3, B0.1, B1.2, B1.3, B0.2, B0.3");
  CHECK(order_of(2, 2, 4, 0, 1) ==
        "F0.0, F0.1, F1.0, B1.0, F1.1, B1.1, F0.2, B0.0, F0.3, B0.1, F1.2, B1.2, F1.3, B1.3, B0.2, B0.3");
  // PP=2, V=2, M=5, G=3 (the table 0 1 2 0 1 2 3 4 3 4): rank 0 warms up with 2 + 3 = 5.
  CHECK(order_of(2, 2, 5, 3, 0) == "F0.0, F0.1, F0.2, F1.0, F1.1, F1.2, B1.0, F0.3, B1.1, F0.4, B1.2, F1.3, B0.0, "
                                    "F1.4, B0.1, B0.2, B1.3, B1.4, B0.3, B0.4");
  // PP=4, V=2, M=4: every rank's warm-up reaches M·V = 8 on rank 0 (all forwards first); rank 3
  // warms up with 4.
  CHECK(order_of(4, 2, 4, 0, 0) ==
        "F0.0, F0.1, F0.2, F0.3, F1.0, F1.1, F1.2, F1.3, B1.0, B1.1, B1.2, B1.3, B0.0, B0.1, B0.2, B0.3");
  CHECK(order_of(4, 2, 4, 0, 3) ==
        "F0.0, F0.1, F0.2, F0.3, F1.0, B1.0, F1.1, B1.1, F1.2, B1.2, F1.3, B1.3, B0.0, B0.1, B0.2, B0.3");
  // PP=4, V=2, M=8: rank 1 warms up with 2·2 + 4 = 8.
  CHECK(order_of(4, 2, 8, 0, 1) == "F0.0, F0.1, F0.2, F0.3, F1.0, F1.1, F1.2, F1.3, F0.4, B1.0, F0.5, B1.1, "
                                    "F0.6, B1.2, F0.7, B1.3, F1.4, B0.0, F1.5, B0.1, F1.6, B0.2, F1.7, B0.3, "
                                    "B1.4, B1.5, B1.6, B1.7, B0.4, B0.5, B0.6, B0.7");
}

TEST_CASE("interleaved schedule: Megatron's shape checks", "[train][pipeline]") {
  // G within [P, M].
  CHECK_THROWS_WITH(interleaved_schedule({4, 2, 2, 0}, 0),
                    Catch::Contains("--microbatch-group-size-per-virtual-pipeline-stage (4, the default: "
                                    "--pipeline-model-parallel-size) must lie between"));
  CHECK_THROWS_WITH(interleaved_schedule({2, 2, 4, 5}, 0), Catch::Contains("must lie between"));
  // The last group: 0 or at least P micro-batches.
  CHECK_THROWS_WITH(interleaved_schedule({4, 2, 9, 0}, 0), Catch::Contains("modulo"));
  CHECK_NOTHROW(interleaved_schedule({2, 2, 5, 3}, 0));
  CHECK_NOTHROW(interleaved_schedule({4, 2, 12, 0}, 0));
  try {
    interleaved_schedule({4, 2, 9, 0}, 0);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
  }
}

TEST_CASE("interleaved schedule: every rank together, blocking transfers", "[train][pipeline]") {
  int shapes = 0;
  for (std::int64_t p = 2; p <= 5; ++p)
    for (std::int64_t v = 2; v <= 4; ++v)
      for (std::int64_t m = p; m <= 3 * p + 2; ++m)
        for (std::int64_t g = p; g <= m; ++g) {
          const std::int64_t last = m % g;
          if (last > 0 && last < p) continue;
          const InterleavedShape shape{p, v, m, g};
          INFO("P=" << p << " V=" << v << " M=" << m << " G=" << g);
          CHECK(simulate(shape, true).empty());
          CHECK(simulate(shape, false).empty());
          ++shapes;
        }
  CHECK(shapes > 100);
}
