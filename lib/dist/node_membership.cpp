#include "dist/node_membership.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <optional>

#include "core/error.hpp"
#include "dist/collective_watchdog.hpp"
#include "dist/mpi_check.hpp"
#include "dist/mpi_communicator.hpp"

namespace mgt::dist {
namespace {

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "?";
  return name.data();
}

// Every rank's value of `mine`, over `group`.
std::vector<std::int64_t> gather(Communicator& group, std::int64_t mine) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(group.size()));
  group.all_gather(std::span<const std::int64_t>(&mine, 1), std::span<std::int64_t>(all));
  return all;
}

// The group rank of the first rank of this rank's shared-memory node: the same on every rank of
// one node, a name for it. Collective over `group`.
std::int64_t shared_memory_leader(MpiCommunicator& group) {
  std::optional<CollectiveWatchdog::Scope> scope;
  if (group.watchdog())
    scope.emplace(group.watchdog()->watch(InFlightOperation{"MPI_Comm_split_type", nullptr, &group.description()}));
  struct NodeComm {
    MPI_Comm comm = MPI_COMM_NULL;
    ~NodeComm() {
      if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
  } node;
  // Keyed by group rank: the node's rank 0 is its first rank in the group.
  MGT_MPI_CHECK(MPI_Comm_split_type(group.handle(), MPI_COMM_TYPE_SHARED, group.rank(), MPI_INFO_NULL, &node.comm));
  int leader = group.rank();
  MGT_MPI_CHECK(MPI_Bcast(&leader, 1, MPI_INT, 0, node.comm));
  return leader;
}

}  // namespace

int NodeMembership::nodes() const {
  return node_of_rank.empty() ? 0 : *std::max_element(node_of_rank.begin(), node_of_rank.end()) + 1;
}

int NodeMembership::local_rank(int rank) const {
  const int node = node_of_rank.at(static_cast<std::size_t>(rank));
  return static_cast<int>(std::count(node_of_rank.begin(), node_of_rank.begin() + rank, node));
}

bool NodeMembership::one_node(std::span<const int> ranks) const {
  if (ranks.empty()) return true;
  return std::all_of(ranks.begin(), ranks.end(), [&](int r) {
    return node_of_rank.at(static_cast<std::size_t>(r)) == node_of_rank.at(static_cast<std::size_t>(ranks[0]));
  });
}

std::int64_t slurm_node_id(const EnvironmentLookup& lookup_or_null) {
  const char* value = launcher_variable("SLURM_NODEID", lookup_or_null);
  if (!value || !*value) return -1;
  char* end = nullptr;
  const long long id = std::strtoll(value, &end, 10);
  if (*end != '\0' || id < 0) return -1;
  return id;
}

std::vector<int> refine_nodes(std::span<const int> nodes, std::span<const std::int64_t> keys) {
  if (nodes.size() != keys.size()) throw Error("internal error: refine_nodes with a key per rank missing");
  std::map<std::pair<int, std::int64_t>, int> numbers;
  std::vector<int> refined(nodes.size());
  for (std::size_t r = 0; r < nodes.size(); ++r)
    refined[r] = numbers.try_emplace({nodes[r], keys[r]}, static_cast<int>(numbers.size())).first->second;
  return refined;
}

NodeMembership find_node_membership(Communicator& group, const EnvironmentLookup& lookup) {
  NodeMembership m;
  m.node_of_rank.assign(static_cast<std::size_t>(group.size()), 0);
  if (group.size() == 1) {
    m.source = "one process";
    return m;
  }
  std::vector<std::string> sources;
  const std::vector<std::int64_t> slurm = gather(group, slurm_node_id(lookup));
  if (std::none_of(slurm.begin(), slurm.end(), [](std::int64_t id) { return id < 0; })) {
    m.node_of_rank = refine_nodes(m.node_of_rank, slurm);
    sources.push_back("SLURM_NODEID");
  }
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&group)) {
    m.node_of_rank = refine_nodes(m.node_of_rank, gather(group, shared_memory_leader(*mpi)));
    sources.push_back("MPI's shared-memory split");
  }
  if (sources.empty()) {
    const std::vector<std::string> hosts = all_gather_text(group, host_name(), 255);
    std::vector<std::int64_t> keys(hosts.size());
    for (std::size_t r = 0; r < hosts.size(); ++r)
      keys[r] = std::find(hosts.begin(), hosts.end(), hosts[r]) - hosts.begin();
    m.node_of_rank = refine_nodes(m.node_of_rank, keys);
    sources.push_back("host names");
  }
  m.source = sources[0];
  for (std::size_t i = 1; i < sources.size(); ++i) m.source += " and " + sources[i];
  return m;
}

NodeMembership split_into_simulated_nodes(const NodeMembership& membership, int simulated_nodes) {
  const auto ranks = static_cast<int>(membership.node_of_rank.size());
  if (simulated_nodes < 1 || ranks % simulated_nodes != 0)
    throw UsageError("--simulated-nodes " + std::to_string(simulated_nodes) + ": expected a positive divisor of the " +
                     std::to_string(ranks) + " ranks");
  if (simulated_nodes == 1) return membership;
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) blocks[static_cast<std::size_t>(r)] = r / (ranks / simulated_nodes);
  NodeMembership simulated;
  simulated.node_of_rank = refine_nodes(membership.node_of_rank, blocks);
  simulated.source = membership.source + ", --simulated-nodes " + std::to_string(simulated_nodes);
  return simulated;
}

std::string node_membership_line(const NodeMembership& membership, std::size_t limit) {
  std::string line = "> nodes: " + std::to_string(membership.nodes()) + " (" + membership.source +
                     "), node of each rank:";
  const std::size_t shown = std::min(membership.node_of_rank.size(), limit);
  for (std::size_t r = 0; r < shown; ++r) line += " " + std::to_string(membership.node_of_rank[r]);
  if (shown < membership.node_of_rank.size())
    line += " ... (" + std::to_string(membership.node_of_rank.size() - shown) + " more)";
  return line;
}

}  // namespace mgt::dist
