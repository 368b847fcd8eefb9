// Which ranks share a node: the launcher's word (SLURM_NODEID, MPI's shared-memory split), the
// host name only where neither speaks, and the simulated nodes of mgt-train's --simulated-nodes.
// Run alone and under mpiexec on one machine: MPI finds one node; a SLURM_NODEID per rank (given
// here through the lookup) splits it as Slurm would.
#include <catch2/catch.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/node_membership.hpp"
#include "dist_testing.hpp"

using namespace mgt::dist;
using mgt::dist_test::runtime;

namespace {

EnvironmentLookup lookup_of(const std::map<std::string, std::string>& variables) {
  return [variables](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

// The world's ranks behind a communicator that is not MPI's: only all_gather, forwarded to the
// world, which is all that the host-name fallback uses.
class NotMpiCommunicator final : public Communicator {
public:
  explicit NotMpiCommunicator(Communicator& world)
      : Communicator(GroupMembers{"not-MPI world", world.world_ranks(), world.rank()}, nullptr), world_(&world) {}
  const char* transport() const override { return "forwarding"; }

private:
  [[noreturn]] static void unused() { throw std::logic_error("not used by find_node_membership"); }
  void do_all_gather(SendBuffer send, RecvBuffer recv) override { world_->all_gather(send, recv); }
  void do_all_reduce(RecvBuffer, ReduceOp) override { unused(); }
  void do_reduce_scatter(SendBuffer, RecvBuffer, ReduceOp) override { unused(); }
  void do_broadcast(RecvBuffer, int) override { unused(); }
  void do_send(SendBuffer, int) override { unused(); }
  void do_recv(RecvBuffer, int) override { unused(); }
  void do_send_recv(SendBuffer, int, RecvBuffer, int) override { unused(); }
  void do_barrier() override { unused(); }
  void do_reduce_scatter_chunks(RecvBuffer, std::span<const std::int64_t>, ReduceOp) override { unused(); }
  void do_all_gather_chunks(RecvBuffer, std::span<const std::int64_t>) override { unused(); }
  Communicator* world_;
};

}  // namespace

TEST_CASE("nodes refined by a key per rank, numbered in the order of their first rank", "[dist][nodes]") {
  const std::vector<int> one = {0, 0, 0, 0};
  CHECK(refine_nodes(one, std::vector<std::int64_t>{7, 7, 3, 3}) == std::vector<int>{0, 0, 1, 1});
  CHECK(refine_nodes(one, std::vector<std::int64_t>{5, 9, 5, 9}) == std::vector<int>{0, 1, 0, 1});
  // Two ranks share a node only where both the nodes and the keys say so.
  CHECK(refine_nodes(std::vector<int>{0, 0, 1, 1}, std::vector<std::int64_t>{0, 1, 0, 1}) ==
        std::vector<int>{0, 1, 2, 3});
  CHECK(refine_nodes(std::vector<int>{0, 1, 0, 1}, std::vector<std::int64_t>{4, 4, 4, 4}) ==
        std::vector<int>{0, 1, 0, 1});
  CHECK_THROWS_AS(refine_nodes(one, std::vector<std::int64_t>{1, 2}), mgt::Error);
}

TEST_CASE("a node's ranks: their count, each rank's place on its node", "[dist][nodes]") {
  const NodeMembership m{{0, 1, 0, 1, 2}, "test"};
  CHECK(m.nodes() == 3);
  CHECK(m.local_rank(0) == 0);
  CHECK(m.local_rank(2) == 1);
  CHECK(m.local_rank(3) == 1);
  CHECK(m.local_rank(4) == 0);
  CHECK(m.one_node(std::vector<int>{0, 2}));
  CHECK_FALSE(m.one_node(std::vector<int>{0, 1}));
  CHECK(m.one_node(std::vector<int>{4}));
}

TEST_CASE("SLURM_NODEID read as a node number, anything else as none", "[dist][nodes]") {
  CHECK(slurm_node_id(lookup_of({{"SLURM_NODEID", "0"}})) == 0);
  CHECK(slurm_node_id(lookup_of({{"SLURM_NODEID", "12"}})) == 12);
  CHECK(slurm_node_id(lookup_of({})) == -1);
  CHECK(slurm_node_id(lookup_of({{"SLURM_NODEID", ""}})) == -1);
  CHECK(slurm_node_id(lookup_of({{"SLURM_NODEID", "-1"}})) == -1);
  CHECK(slurm_node_id(lookup_of({{"SLURM_NODEID", "1x"}})) == -1);
}

TEST_CASE("simulated nodes: consecutive blocks of ranks, within the real nodes", "[dist][nodes]") {
  const NodeMembership machine{{0, 0, 0, 0}, "MPI's shared-memory split"};
  const NodeMembership two = split_into_simulated_nodes(machine, 2);
  CHECK(two.node_of_rank == std::vector<int>{0, 0, 1, 1});
  CHECK(two.source == "MPI's shared-memory split, --simulated-nodes 2");
  CHECK(split_into_simulated_nodes(machine, 4).node_of_rank == std::vector<int>{0, 1, 2, 3});
  CHECK(split_into_simulated_nodes(machine, 1).node_of_rank == machine.node_of_rank);
  CHECK(split_into_simulated_nodes(machine, 1).source == machine.source);
  // Real nodes stay apart: ranks on two machines never share a simulated node.
  const NodeMembership two_machines{{0, 1, 0, 1}, "SLURM_NODEID"};
  CHECK(split_into_simulated_nodes(two_machines, 2).node_of_rank == std::vector<int>{0, 1, 2, 3});
  for (int bad : {0, -1, 3, 8}) {
    try {
      split_into_simulated_nodes(machine, bad);
      FAIL("--simulated-nodes " << bad << " accepted for 4 ranks");
    } catch (const mgt::Error& e) {
      CHECK(e.exit_code() == mgt::kExitUsage);
      CHECK(std::string(e.what()) == "--simulated-nodes " + std::to_string(bad) +
                                         ": expected a positive divisor of the 4 ranks");
    }
  }
}

TEST_CASE("the start-up line of nodes", "[dist][nodes]") {
  const NodeMembership m{{0, 0, 1, 1}, "SLURM_NODEID and MPI's shared-memory split"};
  CHECK(node_membership_line(m) ==
        "> nodes: 2 (SLURM_NODEID and MPI's shared-memory split), node of each rank: 0 0 1 1");
  CHECK(node_membership_line(m, 3) ==
        "> nodes: 2 (SLURM_NODEID and MPI's shared-memory split), node of each rank: 0 0 1 ... (1 more)");
}

TEST_CASE("the ranks of one machine: one node, as MPI's shared-memory split finds", "[dist][nodes]") {
  Communicator& world = runtime().world();
  const NodeMembership m = find_node_membership(world, lookup_of({}));
  CHECK(m.node_of_rank == std::vector<int>(static_cast<std::size_t>(world.size()), 0));
  CHECK(m.source == (world.size() == 1 ? "one process" : "MPI's shared-memory split"));
  CHECK(m.local_rank(world.rank()) == world.rank());
}

TEST_CASE("SLURM_NODEID on every rank splits the machine as Slurm's nodes", "[dist][nodes]") {
  Communicator& world = runtime().world();
  // Slurm placing ranks 0, 2, … on node 5 and ranks 1, 3, … on node 3.
  const NodeMembership m =
      find_node_membership(world, lookup_of({{"SLURM_NODEID", world.rank() % 2 == 0 ? "5" : "3"}}));
  std::vector<int> expected(static_cast<std::size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) expected[static_cast<std::size_t>(r)] = r % 2;
  CHECK(m.node_of_rank == expected);
  if (world.size() > 1) {
    CHECK(m.source == "SLURM_NODEID and MPI's shared-memory split");
    CHECK(m.local_rank(world.rank()) == world.rank() / 2);
  }
}

TEST_CASE("SLURM_NODEID on some ranks only is not the launcher's word", "[dist][nodes]") {
  Communicator& world = runtime().world();
  std::map<std::string, std::string> variables;
  if (world.rank() == 0) variables["SLURM_NODEID"] = "1";
  const NodeMembership m = find_node_membership(world, lookup_of(variables));
  CHECK(m.nodes() == 1);
  if (world.size() > 1) CHECK(m.source == "MPI's shared-memory split");
}

TEST_CASE("a group that is not MPI's: its ranks' host names", "[dist][nodes]") {
  Communicator& world = runtime().world();
  if (world.size() == 1) return;  // a group of one is one node whatever it is
  NotMpiCommunicator group(world);
  const NodeMembership m = find_node_membership(group, lookup_of({}));
  CHECK(m.nodes() == 1);
  CHECK(m.source == "host names");
  // Slurm's word still counts without MPI.
  const NodeMembership slurm =
      find_node_membership(group, lookup_of({{"SLURM_NODEID", std::to_string(world.rank())}}));
  CHECK(slurm.nodes() == world.size());
  CHECK(slurm.source == "SLURM_NODEID");
}
