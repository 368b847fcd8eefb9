// Which ranks share a node: one machine, whose GPUs can map each other's memory (CUDA IPC, the
// copy-engine collectives of nccl_peer_copy.hpp) and whose ranks number their GPUs from 0 (the
// device of each rank). Between nodes only NCCL's network transport (or MPI) can carry data.
//
// The launcher says, never a guess from host names alone (two machines can share a name, and a
// test can make one machine several nodes):
//   - Slurm's SLURM_NODEID, where every rank has one (srun sets it per task: the step's node);
//   - MPI's shared-memory split (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), where the group
//     is an MPI communicator: MPICH takes the ranks' placement from its process manager (hydra,
//     or Slurm's PMI-2);
//   - the host name, only where neither speaks (a group that is not MPI's).
// Where Slurm and MPI both speak, ranks share a node only if both say so: a variable copied to
// every rank by a launcher that spreads the environment (mpiexec inside a batch script) cannot
// merge two machines, and Slurm's nodes stay apart where several run on one host.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/launch_environment.hpp"

namespace mgt::dist {

struct NodeMembership {
  // node_of_rank[r]: rank r's node, numbered 0, 1, … in the order of each node's first rank.
  std::vector<int> node_of_rank;
  // What decided it, for the start-up line ("SLURM_NODEID and MPI's shared-memory split").
  std::string source;

  int nodes() const;
  // `rank`'s place among the ranks of its node, in rank order.
  int local_rank(int rank) const;
  // Whether `ranks` all lie on one node.
  bool one_node(std::span<const int> ranks) const;
};

// Collective over `group`: its ranks' nodes, indexed by group rank. `lookup` reads this process's
// environment (std::getenv by default).
NodeMembership find_node_membership(Communicator& group, const EnvironmentLookup& lookup = nullptr);

// SLURM_NODEID as a number, or -1 where it is absent or not a non-negative integer.
std::int64_t slurm_node_id(const EnvironmentLookup& lookup = nullptr);

// `nodes` split further by `keys` (one per rank): two ranks share a node in the result only where
// they share one in `nodes` and have equal keys. Renumbered in the order of each node's first rank.
std::vector<int> refine_nodes(std::span<const int> nodes, std::span<const std::int64_t> keys);

// A testing aid (mgt-train's --simulated-nodes): `membership` with consecutive blocks of
// size / `simulated_nodes` ranks as nodes of their own besides, so that one machine stands for
// several (the copy-engine path inside each block, NCCL between them). 1 leaves it as it is.
// Throws a usage error unless `simulated_nodes` is at least 1 and divides the ranks.
NodeMembership split_into_simulated_nodes(const NodeMembership& membership, int simulated_nodes);

// The start-up line: "> nodes: 2 (SLURM_NODEID and MPI's shared-memory split), node of each
// rank: 0 0 1 1"; past `limit` ranks, the first `limit` and a count.
std::string node_membership_line(const NodeMembership& membership, std::size_t limit = 256);

}  // namespace mgt::dist
