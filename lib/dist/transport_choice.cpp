#include "dist/transport_choice.hpp"

#include <map>

#include "core/error.hpp"

namespace mgt::dist {

DistributedBackend parse_distributed_backend(const std::string& value) {
  if (value == "nccl") return DistributedBackend::Nccl;
  if (value == "gloo" || value == "mpi") return DistributedBackend::Mpi;
  throw UsageError("--distributed-backend: '" + value + "' is not one of nccl, gloo, mpi");
}

bool wants_nccl(const TransportInputs& in) {
  return in.world_size > 1 && in.device_backend && in.requested == DistributedBackend::Nccl &&
         in.nccl_built && !in.shared_device;
}

TransportChoice choose_transport(const TransportInputs& in) {
  if (in.world_size <= 1) return {};
  if (wants_nccl(in))
    return {true, "> communication: NCCL between the GPUs, queued on each rank's compute stream "
                  "(--overlap-grad-reduce's buckets on a stream beside it; communicators set up over MPI)"};
  const std::string staged = "> communication: MPI, device buffers staged through host memory: ";
  if (!in.device_backend)
    return {false, "> communication: MPI (the CPU backend's buffers are host memory)"};
  if (in.requested != DistributedBackend::Nccl)
    return {false, staged + "--distributed-backend asks for MPI"};
  if (!in.nccl_built) return {false, staged + "this mgt was built without NCCL"};
  return {false, staged + *in.shared_device + ", and NCCL needs a GPU of its own for each rank"};
}

std::optional<std::string> find_shared_device(const ParallelLayout& layout,
                                              const std::vector<std::string>& device_of_rank) {
  if (device_of_rank.size() != static_cast<std::size_t>(layout.world_size()))
    throw Error("internal error: " + std::to_string(device_of_rank.size()) + " devices for a world of " +
                std::to_string(layout.world_size()) + " ranks");
  for (GroupKind kind : {GroupKind::TensorModelParallel, GroupKind::DataParallel,
                         GroupKind::PipelineModelParallel, GroupKind::ModelParallel,
                         GroupKind::Embedding, GroupKind::ContextParallel}) {
    for (const std::vector<int>& group : layout.groups(kind)) {
      std::map<std::string, int> first_on;  // device -> the group's first rank on it
      for (const int rank : group) {
        const std::string& device = device_of_rank[static_cast<std::size_t>(rank)];
        const auto [at, fresh] = first_on.emplace(device, rank);
        if (!fresh)
          return "ranks " + std::to_string(at->second) + " and " + std::to_string(rank) + " of the " +
                 group_kind_name(kind) + " group " + format_ranks(group) + " share " + device;
      }
    }
  }
  return std::nullopt;
}

}  // namespace mgt::dist
