// The choice between NCCL and MPI for mgt-train's groups: pure functions, checked on any machine.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "dist/transport_choice.hpp"

using namespace mgt::dist;

namespace {

ParallelLayout layout(std::int64_t tp, std::int64_t pp, int world) {
  ParallelFlags f;
  f.tensor_model_parallel_size = tp;
  f.pipeline_model_parallel_size = pp;
  return ParallelLayout(f, world);
}

// Two GPU ranks of a build with NCCL, asking for Megatron's default.
TransportInputs two_gpu_ranks() {
  TransportInputs in;
  in.world_size = 2;
  in.device_backend = true;
  in.nccl_built = true;
  return in;
}

}  // namespace

TEST_CASE("--distributed-backend takes Megatron's values and mpi", "[dist][transport]") {
  CHECK(parse_distributed_backend("nccl") == DistributedBackend::Nccl);
  CHECK(parse_distributed_backend("gloo") == DistributedBackend::Mpi);
  CHECK(parse_distributed_backend("mpi") == DistributedBackend::Mpi);
  try {
    parse_distributed_backend("tcp");
    FAIL("tcp accepted");
  } catch (const mgt::Error& e) {
    CHECK(e.exit_code() == mgt::kExitUsage);
    CHECK(std::string(e.what()) == "--distributed-backend: 'tcp' is not one of nccl, gloo, mpi");
  }
}

TEST_CASE("NCCL between GPU ranks, MPI otherwise, each with its reason", "[dist][transport]") {
  TransportInputs in = two_gpu_ranks();
  CHECK(wants_nccl(in));
  TransportChoice c = choose_transport(in);
  CHECK(c.nccl);
  CHECK(c.line == "> communication: NCCL between the GPUs, queued on each rank's compute stream "
                  "(--overlap-grad-reduce's buckets on a stream beside it; communicators set up over MPI)");

  // A world of one has nothing to communicate, and nothing to say.
  in.world_size = 1;
  CHECK_FALSE(wants_nccl(in));
  c = choose_transport(in);
  CHECK_FALSE(c.nccl);
  CHECK(c.line.empty());

  in = two_gpu_ranks();
  in.device_backend = false;
  c = choose_transport(in);
  CHECK_FALSE(c.nccl);
  CHECK(c.line == "> communication: MPI (the CPU backend's buffers are host memory)");
  // The CPU backend uses MPI whatever the flag says.
  in.requested = DistributedBackend::Mpi;
  CHECK(choose_transport(in).line == c.line);

  in = two_gpu_ranks();
  in.requested = DistributedBackend::Mpi;
  c = choose_transport(in);
  CHECK_FALSE(c.nccl);
  CHECK(c.line == "> communication: MPI, device buffers staged through host memory: "
                  "--distributed-backend asks for MPI");

  in = two_gpu_ranks();
  in.nccl_built = false;
  c = choose_transport(in);
  CHECK_FALSE(c.nccl);
  CHECK(c.line == "> communication: MPI, device buffers staged through host memory: "
                  "this mgt was built without NCCL");

  in = two_gpu_ranks();
  in.shared_device = "ranks 0 and 1 of the tensor-model-parallel group [0, 1] share GPU-a";
  CHECK_FALSE(wants_nccl(in));
  c = choose_transport(in);
  CHECK_FALSE(c.nccl);
  CHECK(c.line == "> communication: MPI, device buffers staged through host memory: ranks 0 and 1 of "
                  "the tensor-model-parallel group [0, 1] share GPU-a, and NCCL needs a GPU of its own "
                  "for each rank");
}

TEST_CASE("ranks sharing a GPU are found in whichever group holds them", "[dist][transport]") {
  // One GPU per rank.
  CHECK_FALSE(find_shared_device(layout(2, 1, 4), {"A", "B", "C", "D"}));
  CHECK_FALSE(find_shared_device(layout(1, 1, 1), {"A"}));
  // Every process on one GPU (tools/gpu/parallel_one_gpu.sh): the first group of the first kind.
  CHECK(find_shared_device(layout(2, 1, 2), {"A", "A"}) ==
        "ranks 0 and 1 of the tensor-model-parallel group [0, 1] share A");
  CHECK(find_shared_device(layout(1, 1, 2), {"A", "A"}) ==
        "ranks 0 and 1 of the data-parallel group [0, 1] share A");
  // Four ranks on two GPUs of one machine (local rank mod 2): the tensor-parallel pairs have a
  // GPU each, the data-parallel pairs do not.
  CHECK(find_shared_device(layout(2, 1, 4), {"A", "B", "A", "B"}) ==
        "ranks 0 and 2 of the data-parallel group [0, 2] share A");
  // Pipeline neighbours on one GPU, the rest apart.
  CHECK(find_shared_device(layout(1, 2, 2), {"A", "A"}) ==
        "ranks 0 and 1 of the pipeline-model-parallel group [0, 1] share A");
  // Two machines whose GPUs each have their own UUID: nothing shared.
  CHECK_FALSE(find_shared_device(layout(2, 2, 4), {"A", "B", "C", "D"}));
  CHECK_THROWS_AS(find_shared_device(layout(2, 1, 4), {"A", "B"}), mgt::Error);
}
