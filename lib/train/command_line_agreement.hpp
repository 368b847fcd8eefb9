// Every rank of a run must be started with the same command line. A rank given other flags
// (another --tensor-model-parallel-size, --num-layers or --lr) would otherwise fail far away from
// the cause: a NaN loss and a collective that never completes, a dump of MPI internals, or data-
// parallel copies of the weights that silently drift apart.
#pragma once
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace mgt {

// The arguments that must agree: argv[1..], without the ones a launcher may give each process its
// own value of (--local-rank / --local_rank, as torch.distributed.launch passes them).
std::vector<std::string> rank_independent_arguments(int argc, const char* const* argv);

// "" when `mine` (this rank's) equals `reference` (rank 0's), else the first difference:
// "argument 12 is '--tensor-model-parallel-size' there and '--seq-length' on rank 0".
std::string command_line_difference(const std::vector<std::string>& mine, const std::vector<std::string>& reference);

// Collective over `world`: every rank throws the same mgt::UsageError when any rank's arguments
// differ from rank 0's, naming the lowest such rank and the first difference.
void require_same_command_line(dist::Communicator& world, int argc, const char* const* argv);

}  // namespace mgt
