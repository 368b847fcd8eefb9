#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "dist/parallel_layout.hpp"

using namespace mgt::dist;
using Groups = std::vector<std::vector<int>>;

namespace {

ParallelFlags flags(std::int64_t tp, std::int64_t pp) {
  ParallelFlags f;
  f.tensor_model_parallel_size = tp;
  f.pipeline_model_parallel_size = pp;
  return f;
}

std::string usage_error_of(const ParallelFlags& f, int world) {
  try {
    ParallelLayout layout(f, world);
  } catch (const mgt::Error& e) {
    CHECK(e.exit_code() == mgt::kExitUsage);
    return e.what();
  }
  return "";
}

}  // namespace

// The groups megatron/core/parallel_state.py initialize_model_parallel builds for 8 ranks with
// --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 (order "tp-cp-ep-dp-pp").
TEST_CASE("world 8, TP 2, PP 2: Megatron's groups", "[dist][layout]") {
  const ParallelLayout layout(flags(2, 2), 8);
  CHECK(layout.data_parallel_size() == 2);
  CHECK(layout.groups(GroupKind::TensorModelParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(layout.groups(GroupKind::DataParallel) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(layout.groups(GroupKind::PipelineModelParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(layout.groups(GroupKind::ModelParallel) == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}});
  CHECK(layout.groups(GroupKind::Embedding) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});

  const RankCoordinates c = layout.coordinates(6);
  CHECK(c.tensor == 0);
  CHECK(c.data == 1);
  CHECK(c.pipeline == 1);
  for (int rank = 0; rank < 8; ++rank) CHECK(layout.rank_of(layout.coordinates(rank)) == rank);
  CHECK(layout.group_of(GroupKind::DataParallel, 5) == std::vector<int>{5, 7});
}

// The example in initialize_model_parallel's docstring: 16 GPUs, TP 2, PP 4.
TEST_CASE("world 16, TP 2, PP 4: the docstring's example", "[dist][layout]") {
  const ParallelLayout layout(flags(2, 4), 16);
  CHECK(layout.groups(GroupKind::DataParallel) ==
        Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(layout.groups(GroupKind::TensorModelParallel) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(layout.groups(GroupKind::PipelineModelParallel) ==
        Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  // Embedding groups: first and last stage.
  CHECK(layout.groups(GroupKind::Embedding) == Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}});
  CHECK(layout.group_of(GroupKind::Embedding, 4).empty());
}

TEST_CASE("4 ranks: TP2 x DP2 and PP2 x TP2", "[dist][layout]") {
  const ParallelLayout tp_dp(flags(2, 1), 4);
  CHECK(tp_dp.groups(GroupKind::TensorModelParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(tp_dp.groups(GroupKind::DataParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(tp_dp.groups(GroupKind::PipelineModelParallel) == Groups{{0}, {1}, {2}, {3}});
  CHECK(tp_dp.groups(GroupKind::Embedding) == Groups{{0}, {1}, {2}, {3}});

  const ParallelLayout pp_tp(flags(2, 2), 4);
  CHECK(pp_tp.data_parallel_size() == 1);
  CHECK(pp_tp.groups(GroupKind::TensorModelParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(pp_tp.groups(GroupKind::PipelineModelParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(pp_tp.groups(GroupKind::DataParallel) == Groups{{0}, {1}, {2}, {3}});
  CHECK(pp_tp.groups(GroupKind::ModelParallel) == Groups{{0, 1, 2, 3}});
}

// generate_masked_orthogonal_rank_groups' docstring: sizes [tp, dp, pp] = [2, 3, 4], dp masked.
TEST_CASE("orthogonal rank groups match Megatron's worked example", "[dist][layout]") {
  const Groups dp = orthogonal_rank_groups(24, {2, 3, 4}, {false, true, false});
  REQUIRE(dp.size() == 8);
  CHECK(dp[0] == std::vector<int>{0, 2, 4});
  CHECK(dp[1] == std::vector<int>{1, 3, 5});
  CHECK(dp[7] == std::vector<int>{19, 21, 23});
  // Its other example: order tp-pp-dp, sizes 2-2-2, dp groups.
  CHECK(orthogonal_rank_groups(8, {2, 2, 2}, {false, false, true}) ==
        Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("layout errors name the flag", "[dist][layout]") {
  CHECK_THAT(usage_error_of(flags(4, 1), 6),
             Catch::Contains("world size (6) is not divisible by --tensor-model-parallel-size (4)"));
  CHECK_THAT(usage_error_of(flags(2, 3), 8),
             Catch::Contains("--tensor-model-parallel-size (2) x --pipeline-model-parallel-size (3)"));
  CHECK_THAT(usage_error_of(flags(0, 1), 8), Catch::Contains("--tensor-model-parallel-size"));
  CHECK_THAT(usage_error_of(flags(1, -2), 8), Catch::Contains("--pipeline-model-parallel-size"));
  ParallelFlags timeout = flags(1, 1);
  timeout.distributed_timeout_minutes = 0;
  CHECK_THAT(usage_error_of(timeout, 1), Catch::Contains("--distributed-timeout-minutes"));
  CHECK(usage_error_of(flags(8, 1), 8).empty());
  CHECK(flags(1, 1).distributed_timeout() == std::chrono::minutes(10));
}

// Context parallelism sits between tensor and data parallelism in Megatron's order: 8 ranks with
// --tensor-model-parallel-size 2 --context-parallel-size 2 leave 2 data-parallel ranks, and the
// gradients are reduced over data-parallel × context-parallel (parallel_state's dp-cp groups).
TEST_CASE("world 8, TP 2, CP 2: Megatron's groups", "[dist][layout]") {
  ParallelFlags f = flags(2, 1);
  f.context_parallel_size = 2;
  const ParallelLayout layout(f, 8);
  CHECK(layout.data_parallel_size() == 2);
  CHECK(layout.context_parallel_size() == 2);
  CHECK(layout.groups(GroupKind::TensorModelParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(layout.groups(GroupKind::ContextParallel) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(layout.groups(GroupKind::DataParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(layout.groups(GroupKind::DataParallelWithContext) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(layout.groups(GroupKind::ModelParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});

  const RankCoordinates c = layout.coordinates(6);
  CHECK(c.tensor == 0);
  CHECK(c.context == 1);
  CHECK(c.data == 1);
  CHECK(c.pipeline == 0);
  for (int rank = 0; rank < 8; ++rank) CHECK(layout.rank_of(layout.coordinates(rank)) == rank);
}

TEST_CASE("world 8, CP 2, PP 2: context-parallel ranks are adjacent within a stage", "[dist][layout]") {
  ParallelFlags f = flags(1, 2);
  f.context_parallel_size = 2;
  const ParallelLayout layout(f, 8);
  CHECK(layout.data_parallel_size() == 2);
  CHECK(layout.groups(GroupKind::ContextParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(layout.groups(GroupKind::PipelineModelParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(layout.groups(GroupKind::DataParallelWithContext) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("a world that context parallelism does not divide is refused", "[dist][layout]") {
  ParallelFlags f = flags(2, 1);
  f.context_parallel_size = 2;
  CHECK(usage_error_of(f, 6) ==
        "world size (6) is not divisible by --tensor-model-parallel-size (2) x --pipeline-model-parallel-size (1) x "
        "--context-parallel-size (2)");
  f.context_parallel_size = 0;
  CHECK(usage_error_of(f, 4) == "--context-parallel-size must be a positive integer, not 0");
}

// parallel_state's expert_decoder_rank_generator (expert-tensor size 1, order "tp-cp-ep-dp-pp"):
// the expert-parallel ranks are consecutive ranks of the dp · cp ranks of a stage.
TEST_CASE("expert parallelism: Megatron's expert groups", "[dist][layout]") {
  ParallelFlags f = flags(1, 1);
  f.expert_model_parallel_size = 2;
  const ParallelLayout dp4(f, 4);
  CHECK(dp4.expert_model_parallel_size() == 2);
  CHECK(dp4.expert_data_parallel_size() == 2);
  CHECK(dp4.groups(GroupKind::ExpertModelParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(dp4.groups(GroupKind::ExpertDataParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(dp4.groups(GroupKind::DataParallel) == Groups{{0, 1, 2, 3}});

  // World 8, CP 2, PP 2: dp · cp = 4 ranks per stage, split into expert-parallel pairs.
  ParallelFlags g = flags(1, 2);
  g.context_parallel_size = 2;
  g.expert_model_parallel_size = 2;
  const ParallelLayout cp(g, 8);
  CHECK(cp.groups(GroupKind::ExpertModelParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(cp.groups(GroupKind::ExpertDataParallel) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});

  // EP = dp: one expert-data-parallel rank each.
  f.expert_model_parallel_size = 4;
  const ParallelLayout all(f, 4);
  CHECK(all.groups(GroupKind::ExpertModelParallel) == Groups{{0, 1, 2, 3}});
  CHECK(all.groups(GroupKind::ExpertDataParallel) == Groups{{0}, {1}, {2}, {3}});
  CHECK(all.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1, 2, 3}});
}

// The expert grid with the tensor-parallel size as its expert-tensor size: the expert-parallel
// groups hold ranks of the same tensor-parallel rank; the tensor-model-pipeline group is the
// expert-parallel ranks of both tensor-parallel ranks.
TEST_CASE("expert parallelism under tensor parallelism: Megatron's default expert grid", "[dist][layout]") {
  ParallelFlags f = flags(2, 1);
  f.expert_model_parallel_size = 2;
  const ParallelLayout l(f, 4);
  CHECK(l.expert_tensor_parallel_size() == 2);
  CHECK(l.expert_data_parallel_size() == 1);
  CHECK(l.groups(GroupKind::ExpertModelParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(l.groups(GroupKind::ExpertDataParallel) == Groups{{0}, {1}, {2}, {3}});
  CHECK(l.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1, 2, 3}});
}

// --expert-tensor-parallel-size 1: parallel_state's expert grid 1 x ep x expert-dp x pp, the
// expert-data-parallel size world / (ep · pp), decoupled from the dense layout's.
TEST_CASE("expert tensor-parallel size 1: the expert grid across the tensor-parallel ranks", "[dist][layout]") {
  // World 4, TP 2, EP 2: the expert-parallel pairs are the dense tensor-parallel pairs.
  ParallelFlags f = flags(2, 1);
  f.expert_model_parallel_size = 2;
  f.expert_tensor_parallel_size = 1;
  const ParallelLayout l(f, 4);
  CHECK(l.data_parallel_size() == 2);
  CHECK(l.expert_tensor_parallel_size() == 1);
  CHECK(l.expert_data_parallel_size() == 2);
  CHECK(l.groups(GroupKind::TensorModelParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(l.groups(GroupKind::ExpertModelParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(l.groups(GroupKind::ExpertDataParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(l.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1}, {2, 3}});

  // World 8, TP 4, EP 2: an expert-parallel pair within a tensor-parallel group of 4, whose ranks
  // 0 and 2 hold the same experts; expert-data-parallel 4 against the dense layout's 2.
  f = flags(4, 1);
  f.expert_model_parallel_size = 2;
  f.expert_tensor_parallel_size = 1;
  const ParallelLayout wide(f, 8);
  CHECK(wide.data_parallel_size() == 2);
  CHECK(wide.expert_data_parallel_size() == 4);
  CHECK(wide.groups(GroupKind::ExpertModelParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(wide.groups(GroupKind::ExpertDataParallel) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});

  // With pipeline parallelism (world 8, TP 2, PP 2, EP 2): each stage's ranks, the experts'
  // tensor-model-pipeline group spanning the stages.
  f = flags(2, 2);
  f.expert_model_parallel_size = 2;
  f.expert_tensor_parallel_size = 1;
  const ParallelLayout pp(f, 8);
  CHECK(pp.groups(GroupKind::ExpertModelParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(pp.groups(GroupKind::ExpertDataParallel) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(pp.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}});

  // World 2, TP 2, EP 4: the expert grid (1 x 4 x pp 1) does not tile it.
  f = flags(2, 1);
  f.expert_model_parallel_size = 4;
  f.expert_tensor_parallel_size = 1;
  CHECK(usage_error_of(f, 2) ==
        "world size (2) is not divisible by --expert-tensor-parallel-size (1) x --expert-model-parallel-size (4) x "
        "--pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (4)");
}

// Other expert-tensor sizes: parallel_state's expert_decoder_rank_generator, RankGenerator(tp =
// expert-tensor, cp = 1, ep, dp = expert-dp, pp) in the order tp-cp-ep-dp-pp, its get_ranks("tp"),
// ("ep"), ("dp"), ("tp-ep") and ("tp-ep-pp") through generate_masked_orthogonal_rank_groups
// (megatron/core/parallel_state.py): the lists below are those functions' output, worked out by
// hand from their definitions (strides 1, etp, etp, etp·ep, etp·ep·edp).
TEST_CASE("other expert tensor-parallel sizes: Megatron's expert rank generator", "[dist][layout]") {
  // World 2, TP 1, expert-tensor 2, EP 1: both ranks split every expert; the dense layout is DP 2.
  ParallelFlags f = flags(1, 1);
  f.expert_tensor_parallel_size = 2;
  const ParallelLayout two(f, 2);
  CHECK(two.separate_expert_grid());
  CHECK(two.data_parallel_size() == 2);
  CHECK(two.expert_data_parallel_size() == 1);
  CHECK(two.groups(GroupKind::ExpertTensorParallel) == Groups{{0, 1}});
  CHECK(two.groups(GroupKind::ExpertModelParallel) == Groups{{0}, {1}});
  CHECK(two.groups(GroupKind::ExpertDataParallel) == Groups{{0}, {1}});
  CHECK(two.groups(GroupKind::ExpertTensorAndModelParallel) == Groups{{0, 1}});
  CHECK(two.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1}});

  // World 4, TP 1, expert-tensor 2, EP 2.
  f.expert_model_parallel_size = 2;
  const ParallelLayout four(f, 4);
  CHECK(four.groups(GroupKind::ExpertTensorParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(four.groups(GroupKind::ExpertModelParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(four.groups(GroupKind::ExpertDataParallel) == Groups{{0}, {1}, {2}, {3}});
  CHECK(four.groups(GroupKind::ExpertTensorAndModelParallel) == Groups{{0, 1, 2, 3}});
  CHECK(four.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1, 2, 3}});

  // World 8, TP 1, expert-tensor 2, EP 2: expert-data-parallel 2.
  const ParallelLayout eight(f, 8);
  CHECK(eight.expert_data_parallel_size() == 2);
  CHECK(eight.groups(GroupKind::ExpertTensorParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(eight.groups(GroupKind::ExpertModelParallel) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(eight.groups(GroupKind::ExpertDataParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(eight.groups(GroupKind::ExpertTensorAndModelParallel) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(eight.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});

  // With PP 2 (world 8): each stage's ranks; the pipeline groups agree with the dense grid's.
  f = flags(1, 2);
  f.expert_tensor_parallel_size = 2;
  f.expert_model_parallel_size = 2;
  const ParallelLayout pp(f, 8);
  CHECK(pp.expert_data_parallel_size() == 1);
  CHECK(pp.groups(GroupKind::ExpertTensorParallel) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(pp.groups(GroupKind::ExpertModelParallel) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(pp.groups(GroupKind::ExpertTensorAndModelParallel) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(pp.groups(GroupKind::ExpertTensorModelPipeline) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(pp.groups(GroupKind::PipelineModelParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});

  // World 4, TP 4, expert-tensor 2: expert-data-parallel pairs across the tensor-parallel group.
  f = flags(4, 1);
  f.expert_tensor_parallel_size = 2;
  const ParallelLayout narrow(f, 4);
  CHECK(narrow.expert_data_parallel_size() == 2);
  CHECK(narrow.groups(GroupKind::ExpertTensorParallel) == Groups{{0, 1}, {2, 3}});
  CHECK(narrow.groups(GroupKind::ExpertDataParallel) == Groups{{0, 2}, {1, 3}});
  CHECK(narrow.groups(GroupKind::ExpertTensorAndModelParallel) == Groups{{0, 1}, {2, 3}});

  // World 8, TP 2, expert-tensor 4, EP 2: one expert-data-parallel rank each.
  f = flags(2, 1);
  f.expert_tensor_parallel_size = 4;
  f.expert_model_parallel_size = 2;
  const ParallelLayout wide(f, 8);
  CHECK(wide.expert_data_parallel_size() == 1);
  CHECK(wide.groups(GroupKind::ExpertTensorParallel) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(wide.groups(GroupKind::ExpertModelParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(wide.groups(GroupKind::ExpertTensorAndModelParallel) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});

  // The tensor size, or 1 without expert parallelism, needs no grid of its own.
  CHECK_FALSE(ParallelLayout(flags(2, 1), 4).separate_expert_grid());
  f = flags(2, 1);
  f.expert_tensor_parallel_size = 1;
  CHECK_FALSE(ParallelLayout(f, 4).separate_expert_grid());

  // World 2, expert-tensor 4: parallel_state refuses a grid that does not tile the world.
  f = flags(1, 1);
  f.expert_tensor_parallel_size = 4;
  CHECK(usage_error_of(f, 2) ==
        "world size (2) is not divisible by --expert-tensor-parallel-size (4) x --expert-model-parallel-size (1) x "
        "--pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (4)");
}

TEST_CASE("an expert-parallel size that does not divide dp x cp is refused", "[dist][layout]") {
  ParallelFlags f = flags(1, 1);
  f.expert_model_parallel_size = 4;
  CHECK(usage_error_of(f, 2) == "--expert-model-parallel-size (4) must divide the data-parallel size (2)");
  f.expert_model_parallel_size = 0;
  CHECK(usage_error_of(f, 2) == "--expert-model-parallel-size must be a positive integer, not 0");
}
