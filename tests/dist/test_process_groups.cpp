#include <catch2/catch.hpp>

#include <numeric>

#include "dist/distributed_context.hpp"
#include "dist/dist_testing.hpp"
#include "dist/process_groups.hpp"

using namespace mgt::dist;
using mgt::dist_test::runtime;

namespace {

constexpr GroupKind kKinds[] = {GroupKind::TensorModelParallel, GroupKind::DataParallel,
                                GroupKind::PipelineModelParallel, GroupKind::ModelParallel,
                                GroupKind::Embedding, GroupKind::ContextParallel,
                                GroupKind::DataParallelWithContext};

// Every (TP, CP, PP) that divides the world: for 4 ranks TP2 x DP2, PP2 x TP2, DP2 x PP2, TP4,
// PP4, DP4, CP2 x TP2, CP4, …; for 2 ranks TP2, PP2, DP2, CP2.
std::vector<ParallelFlags> layouts_for(int world) {
  std::vector<ParallelFlags> result;
  for (int tp = 1; tp <= world; ++tp)
    for (int cp = 1; cp <= world; ++cp)
      for (int pp = 1; pp <= world; ++pp)
        if (world % (tp * cp * pp) == 0) {
          ParallelFlags f;
          f.tensor_model_parallel_size = tp;
          f.context_parallel_size = cp;
          f.pipeline_model_parallel_size = pp;
          result.push_back(f);
        }
  return result;
}

}  // namespace

TEST_CASE("process groups follow Megatron's rank order", "[dist][groups]") {
  const int world = runtime().world_size();
  const int me = runtime().rank();
  for (const ParallelFlags& flags : layouts_for(world)) {
    const ParallelLayout layout(flags, world);
    ProcessGroups groups = make_process_groups(runtime(), layout);
    INFO("TP " << flags.tensor_model_parallel_size << ", CP " << flags.context_parallel_size << ", PP "
               << flags.pipeline_model_parallel_size);
    for (GroupKind kind : kKinds) {
      const std::vector<int> members = layout.group_of(kind, me);
      Communicator* comm = groups.find(kind);
      INFO(group_kind_name(kind) << " group");
      if (members.empty()) {
        CHECK(comm == nullptr);
        continue;
      }
      REQUIRE(comm != nullptr);
      CHECK(comm->world_ranks() == members);
      CHECK(comm->world_ranks()[static_cast<size_t>(comm->rank())] == me);

      // The transport's own rank order is Megatron's: gathering world ranks gives the list.
      std::vector<std::int64_t> mine = {me};
      std::vector<std::int64_t> gathered(members.size());
      comm->all_gather(std::span<const std::int64_t>(mine), std::span(gathered));
      CHECK(std::vector<int>(gathered.begin(), gathered.end()) == members);

      std::vector<double> sum = {static_cast<double>(me)};
      comm->all_reduce(std::span(sum), ReduceOp::Sum);
      CHECK(sum[0] == std::accumulate(members.begin(), members.end(), 0.0));
    }
    // Coordinates agree with the groups: the tensor rank is the rank in the TP group, and so on.
    const RankCoordinates c = layout.coordinates(me);
    CHECK(groups.tensor_model_parallel->rank() == c.tensor);
    CHECK(groups.data_parallel->rank() == c.data);
    CHECK(groups.pipeline_model_parallel->rank() == c.pipeline);
    CHECK(groups.context_parallel->rank() == c.context);
  }
}

// An expert-tensor-parallel size of its own (2 with TP 1): the expert tensor-and-model-parallel
// group, the ranks the tokens travel between, in Megatron's expert rank order; none otherwise.
TEST_CASE("process groups: the expert tensor-and-model-parallel group", "[dist][groups]") {
  const int world = runtime().world_size();
  const int me = runtime().rank();
  ParallelFlags f;
  if (world % 2 == 0) {
    f.expert_tensor_parallel_size = 2;
    f.expert_model_parallel_size = world / 2;
    const ParallelLayout layout(f, world);
    ProcessGroups groups = make_process_groups(runtime(), layout);
    Communicator* comm = groups.find(GroupKind::ExpertTensorAndModelParallel);
    REQUIRE(comm != nullptr);
    CHECK(comm->world_ranks() == layout.group_of(GroupKind::ExpertTensorAndModelParallel, me));
    CHECK(groups.expert_model_parallel->world_ranks() == layout.group_of(GroupKind::ExpertModelParallel, me));
    // Group rank = expert-tensor rank + 2 · expert-parallel rank.
    CHECK(comm->rank() / 2 == groups.expert_model_parallel->rank());
  }
  f = ParallelFlags{};
  ProcessGroups dense = make_process_groups(runtime(), ParallelLayout(f, world));
  CHECK(dense.find(GroupKind::ExpertTensorAndModelParallel) == nullptr);
}

TEST_CASE("every operation on the sub-groups of the 4-rank layouts", "[dist][groups]") {
  const int world = runtime().world_size();
  mgt::dist_test::HostMemory host;
  // TP2 x DP2 and PP2 x TP2 where the world has 4 ranks; whatever fits otherwise.
  std::vector<std::pair<int, int>> tp_pp = {{2, 1}, {2, 2}};
  if (world != 4) tp_pp = {{world, 1}, {1, world}};
  for (const auto& [tp, pp] : tp_pp) {
    ParallelFlags flags;
    flags.tensor_model_parallel_size = tp;
    flags.pipeline_model_parallel_size = pp;
    const ParallelLayout layout(flags, world);
    ProcessGroups groups = make_process_groups(runtime(), layout);
    // Every rank walks the kinds in the same order; groups of one kind run concurrently.
    for (GroupKind kind : {GroupKind::TensorModelParallel, GroupKind::DataParallel,
                           GroupKind::PipelineModelParallel})
      mgt::dist_test::check_all_operations(groups.get(kind), host);
  }
}

TEST_CASE("pipeline neighbours exchange activations with send_recv", "[dist][groups]") {
  const int world = runtime().world_size();
  ParallelFlags flags;
  flags.pipeline_model_parallel_size = world;
  const ParallelLayout layout(flags, world);
  ProcessGroups groups = make_process_groups(runtime(), layout);
  Communicator& pp = *groups.pipeline_model_parallel;
  const int stage = pp.rank();
  const int stages = pp.size();
  // Forward: stage s receives from s-1 what it computed; the first stage starts, the last ends.
  std::vector<float> activation(6, 0.0f);
  if (stage > 0) pp.recv(std::span(activation), stage - 1);
  for (float& a : activation) a += 1.0f;
  if (stage + 1 < stages) pp.send(std::span(activation), stage + 1);
  CHECK(activation == std::vector<float>(6, static_cast<float>(stage + 1)));
}

TEST_CASE("init_distributed builds the context for the flags", "[dist][groups]") {
  // A second runtime cannot start under MPI; the context's parts are checked through the
  // running one in the tests above. A lone process can start a fresh one.
  if (runtime().uses_mpi()) {
    SUCCEED("runs only as a lone process");
    return;
  }
  ParallelFlags flags;
  DistributedContext ctx = init_distributed(flags, std::chrono::seconds(30));
  CHECK(ctx.world_size() == 1);
  CHECK(ctx.rank() == 0);
  CHECK(ctx.layout.data_parallel_size() == 1);
  CHECK(std::string(ctx.groups.tensor_model_parallel->transport()) == "local");
  REQUIRE(ctx.groups.embedding);
  std::vector<float> x = {2.0f};
  ctx.groups.data_parallel->all_reduce(std::span(x), ReduceOp::Sum);
  CHECK(x[0] == 2.0f);

  flags.tensor_model_parallel_size = 2;
  CHECK_THROWS_WITH(init_distributed(flags, std::chrono::seconds(30)),
                    Catch::Contains("world size (1) is not divisible by "
                                    "--tensor-model-parallel-size (2)"));
}
