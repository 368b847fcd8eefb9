// Pipeline parallelism in the GPT model: the stages of a pipeline, run with the 1F1B schedule over
// the pipeline group (with tensor and sequence parallelism inside each stage where the world has
// room), compute the single-rank model's loss and gradients — with tied embeddings, the first
// stage's word embedding and the last stage's copy both end with the single-rank gradient — and
// evaluation passes its loss. Every rank builds the single-rank reference itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "dist/dist_testing.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_model.hpp"
#include "model/model_testing.hpp"
#include "model/parameter_sharding.hpp"
#include "model/pipeline_stage.hpp"
#include "train/batch_prefetcher.hpp"
#include "train/pipeline_executor.hpp"

using namespace mgt;
using namespace mgt::model_testing;
using mgt::dist_test::runtime;

namespace {

constexpr double kTolerance = 1e-5;
constexpr int64_t kMicrobatches = 5;

GptConfig four_layers(GptConfig c) {
  c.num_layers = 4;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.2;
  return c;
}

struct Case {
  std::string name;
  GptConfig config;
};

std::vector<Case> cases() {
  GptConfig llama = four_layers(llama_like_config());
  GptConfig gpt2_full_recompute = four_layers(gpt2_like_config());
  gpt2_full_recompute.recompute_granularity = RecomputeGranularity::kFull;
  return {{"GPT-2-like (tied)", four_layers(gpt2_like_config())},
          {"Llama-like (untied)", llama},
          {"GPT-2-like, full recompute", gpt2_full_recompute}};
}

struct Layout {
  int tp;
  int pp;
};

// The layouts a world can run with a pipeline: PP over every divisor ≥ 2 with TP = 1, and TP = 2
// × PP = 2 on four ranks.
std::vector<Layout> layouts(int world) {
  std::vector<Layout> out;
  for (int pp = 2; pp <= world; ++pp)
    if (world % pp == 0) out.push_back({1, pp});
  if (world % 4 == 0) out.push_back({2, 2});
  return out;
}

dist::ProcessGroups groups_for(const Layout& l) {
  dist::ParallelFlags flags;
  flags.tensor_model_parallel_size = l.tp;
  flags.pipeline_model_parallel_size = l.pp;
  return dist::make_process_groups(runtime(), dist::ParallelLayout(flags, runtime().world_size()));
}

double relative_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0.0;
  double scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

double relative_difference(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-30); }

// The whole tensor from every tensor-parallel rank's shard.
std::vector<float> gather_tensor(dist::Communicator& group, const ParameterEntry& entry,
                                 const std::vector<float>& shard) {
  std::vector<float> all(shard.size() * static_cast<size_t>(group.size()));
  group.all_gather(std::span<const float>(shard), std::span<float>(all));
  std::vector<float> whole(static_cast<size_t>(entry.global_numel()));
  for (int r = 0; r < group.size(); ++r)
    unshard_tensor(entry, {group.size(), r},
                   std::span<const float>(all.data() + static_cast<size_t>(r) * shard.size(), shard.size()), whole);
  return whole;
}

// The stage's shards of the single-rank model's parameters.
void copy_stage_parameters(const GptParameters& whole, GptParameters& stage) {
  for (const ParameterEntry& e : stage.entries())
    stage.write_param(e, shard_tensor(e, stage.tensor_parallel(), whole.read_param(whole.entry(e.name))));
}

HostMicroBatch host_batch(const RefBatch& b) {
  HostMicroBatch h;
  h.batch_size = b.batch;
  h.seq_length = b.seq;
  h.tokens = b.tokens;
  h.labels = b.labels;
  h.position_ids = b.positions;
  h.loss_mask = b.loss_mask;
  return h;
}

std::vector<RefBatch> batches_for(const GptConfig& c) {
  std::vector<RefBatch> out;
  for (uint32_t i = 0; i < kMicrobatches; ++i) out.push_back(random_batch(c, 2, 8, 20 + i));
  return out;
}

DropoutRng dropout_of(int64_t mb) { return {1234, static_cast<uint64_t>(30 + mb)}; }

LossSum reference_iteration(GptModel& model, const std::vector<RefBatch>& batches) {
  model.parameters().zero_grads();
  LossSum sum;
  for (size_t i = 0; i < batches.size(); ++i) {
    const LossSum s = model.forward_backward(micro_batch(batches[i]), dropout_of(static_cast<int64_t>(i)),
                                             static_cast<int64_t>(batches.size()));
    sum.loss_sum += s.loss_sum;
    sum.token_count += s.token_count;
  }
  return sum;
}

LossSum pipeline_iteration(GptModel& model, dist::Communicator& pipeline, const std::vector<RefBatch>& batches) {
  model.parameters().zero_grads();
  PipelineExecutor executor(model, pipeline);
  size_t next = 0;
  const LossSum sum = executor.train(
      static_cast<int64_t>(batches.size()), [&] { return host_batch(batches.at(next++)); }, dropout_of,
      static_cast<int64_t>(batches.size()));
  CHECK(next == batches.size());
  model.all_reduce_partial_grads();
  model.all_reduce_embedding_grads();
  return sum;
}

}  // namespace

TEST_CASE("pipeline stages split the layers as Megatron does", "[dist][pp]") {
  const std::vector<PipelineStage> even = pipeline_stages(8, {4, {}, {}});
  REQUIRE(even.size() == 4);
  CHECK(even[2].first_layer == 4);
  CHECK(even[2].num_layers == 2);
  const std::vector<PipelineStage> uneven = pipeline_stages(10, {4, 1, 3});
  CHECK(uneven[0].num_layers == 1);
  CHECK(uneven[1].first_layer == 1);
  CHECK(uneven[1].num_layers == 3);
  CHECK(uneven[2].first_layer == 4);
  CHECK(uneven[3].first_layer == 7);
  CHECK(uneven[3].num_layers == 3);
  CHECK(pipeline_stages(5, {2, 2, {}})[1].num_layers == 3);
  CHECK_THROWS_WITH(pipeline_stages(6, {4, {}, {}}),
                    Catch::Contains("--num-layers (6) must be divisible by --pipeline-model-parallel-size (4)"));
  CHECK_THROWS_WITH(pipeline_stages(10, {4, 2, {}}), Catch::Contains("remaining layers must divide evenly"));
  CHECK_THROWS_WITH(pipeline_stages(6, {2, 2, 3}), Catch::Contains("must build all 6 layers"));
  CHECK_THROWS_WITH(pipeline_stages(4, {1, 2, {}}), Catch::Contains("need --pipeline-model-parallel-size > 1"));
  CHECK(pipeline_stages(4, {1, {}, {}})[0].whole_model());
}

TEST_CASE("pipeline stages hold their part of the parameters, the tied copy uncounted", "[dist][pp]") {
  for (const Case& test : cases()) {
    INFO(test.name);
    const ParameterTable whole = gpt_parameter_table(test.config);
    int64_t whole_count = 0;
    for (const ParameterEntry& e : whole.entries) whole_count += e.numel();
    int64_t counted = 0;
    std::vector<std::string> names;
    for (const PipelineStage& stage : pipeline_stages(4, {2, {}, {}})) {
      for (const ParameterEntry& e : gpt_parameter_table(test.config, {}, stage).entries) {
        if (e.counted_on({})) {
          counted += e.numel();
          names.push_back(e.name);
        }
        CHECK(e.pipeline_duplicate == (stage.is_last() && e.name == "embedding.word_embeddings.weight"));
      }
    }
    CHECK(counted == whole_count);
    CHECK(names.size() == whole.entries.size());
  }
}

TEST_CASE("pipeline-parallel GPT reproduces the single-rank loss and gradients", "[dist][pp]") {
  const int world = runtime().world_size();
  for (const Layout& layout : layouts(world)) {
    dist::ProcessGroups groups = groups_for(layout);
    dist::Communicator& pipeline = *groups.pipeline_model_parallel;
    dist::Communicator& tensor = *groups.tensor_model_parallel;
    for (const Case& test : cases()) {
      for (const bool sequence_parallel : {false, true}) {
        if (sequence_parallel && layout.tp == 1) continue;
        INFO(test.name << ", TP " << layout.tp << ", PP " << layout.pp << (sequence_parallel ? ", SP" : ""));
        const GptConfig& c = test.config;
        const std::vector<RefBatch> batches = batches_for(c);
        const auto backend_owner = make_backend("cpu");
        Backend& backend = *backend_owner;
        GptModel reference(c, backend, 7);
        randomize_parameters(reference.parameters(), 11);
        const LossSum want = reference_iteration(reference, batches);

        const PipelineStage stage = pipeline_stage(c.num_layers, {layout.pp, {}, {}}, pipeline.rank());
        GptModel model(c, backend, std::nullopt, {layout.tp > 1 ? &tensor : nullptr, sequence_parallel},
                       {stage, groups.embedding.get()});
        copy_stage_parameters(reference.parameters(), model.parameters());
        const LossSum got = pipeline_iteration(model, pipeline, batches);

        CHECK(got.token_count == want.token_count);
        const double loss_error = relative_difference(got.loss_sum, want.loss_sum);
        INFO("loss " << got.loss_sum << " vs " << want.loss_sum);
        CHECK(loss_error <= kTolerance);
        double worst = 0.0;
        std::string worst_name;
        for (const ParameterEntry& e : model.parameters().entries()) {
          const std::vector<float> whole = gather_tensor(tensor, e, model.parameters().read_grad(e));
          const double error =
              relative_difference(whole, reference.parameters().read_grad(reference.parameters().entry(e.name)));
          if (error > worst || worst_name.empty()) {
            worst = error;
            worst_name = e.name;
          }
        }
        INFO("largest gradient difference: " << worst_name << ", relative " << worst);
        CHECK(worst <= kTolerance);
        if (runtime().rank() == 0)
          std::printf("TP %d PP %d%s %-28s loss rel. diff %.2e, worst grad rel. diff %.2e (%s)\n", layout.tp,
                      layout.pp, sequence_parallel ? " SP" : "   ", test.name.c_str(), loss_error, worst,
                      worst_name.c_str());
      }
    }
  }
}

TEST_CASE("pipeline-parallel evaluation passes the single-rank loss", "[dist][pp]") {
  const int world = runtime().world_size();
  for (const Layout& layout : layouts(world)) {
    dist::ProcessGroups groups = groups_for(layout);
    dist::Communicator& pipeline = *groups.pipeline_model_parallel;
    for (const Case& test : cases()) {
      INFO(test.name << ", TP " << layout.tp << ", PP " << layout.pp);
      const GptConfig& c = test.config;
      const std::vector<RefBatch> batches = batches_for(c);
      const auto backend_owner = make_backend("cpu");
      Backend& backend = *backend_owner;
      GptModel reference(c, backend, 7);
      randomize_parameters(reference.parameters(), 13);
      LossSum want;
      for (const RefBatch& b : batches) {
        const ForwardOutput out = reference.forward_only(micro_batch(b));
        want.loss_sum += out.loss.loss_sum;
        want.token_count += out.loss.token_count;
      }
      const PipelineStage stage = pipeline_stage(c.num_layers, {layout.pp, {}, {}}, pipeline.rank());
      GptModel model(c, backend, std::nullopt, {layout.tp > 1 ? groups.tensor_model_parallel.get() : nullptr, true},
                     {stage, groups.embedding.get()});
      copy_stage_parameters(reference.parameters(), model.parameters());
      PipelineExecutor executor(model, pipeline);
      size_t next = 0;
      const LossSum got =
          executor.evaluate(static_cast<int64_t>(batches.size()), [&] { return host_batch(batches.at(next++)); });
      CHECK(got.token_count == want.token_count);
      CHECK(relative_difference(got.loss_sum, want.loss_sum) <= kTolerance);
    }
  }
}

TEST_CASE("pipeline stages initialise their layers as the single-rank model, the tied copies alike",
          "[dist][pp]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig c = four_layers(gpt2_like_config());
  GptModel whole(c, backend, 99);
  const std::vector<PipelineStage> stages = pipeline_stages(c.num_layers, {2, {}, {}});
  // A stage needs the embedding group only to communicate; the first stage's tables are enough
  // here, and the last stage's copy is checked against the same whole tensor.
  for (const PipelineStage& stage : stages) {
    GptParameters params(c, backend, {}, stage);
    params.initialize(99);
    for (const ParameterEntry& e : params.entries())
      CHECK(params.read_param(e) == whole.parameters().read_param(whole.parameters().entry(e.name)));
  }
}
