// Activation recomputation under model parallelism: in each layout (TP = 2 with sequence
// parallelism, PP = 2 over the 1F1B schedule, TP = 2 × PP = 2 with it), a recomputing model
// gives the same loss and the same gradients, bit for bit, as the same layout without
// recomputation: the recomputed forward repeats the collectives and the dropout masks of the first.
#include <catch2/catch.hpp>

#include <cstring>
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

constexpr int64_t kMicrobatches = 3;

GptConfig four_layers_with_dropout(GptConfig c) {
  c.num_layers = 4;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.2;
  return c;
}

GptConfig full(GptConfig c, RecomputeMethod method, int64_t layers) {
  c.recompute_granularity = RecomputeGranularity::kFull;
  c.recompute_method = method;
  c.recompute_num_layers = layers;
  return c;
}

struct Layout {
  int tp;
  int pp;
  bool sequence_parallel;
};

std::vector<Layout> layouts(int world) {
  std::vector<Layout> out;
  if (world % 2 == 0) {
    out.push_back({2, 1, true});
    out.push_back({1, 2, false});
  }
  if (world % 4 == 0) out.push_back({2, 2, true});
  return out;
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

DropoutRng dropout_of(int64_t mb) { return {77, static_cast<uint64_t>(3 + mb)}; }

struct Result {
  LossSum loss;
  std::vector<float> grads;  // this rank's shard
};

// One iteration of kMicrobatches micro-batches in `layout`, from the same initial parameters.
Result iteration(const GptConfig& c, const Layout& layout, dist::ProcessGroups& groups) {
  std::vector<RefBatch> batches;
  for (uint32_t i = 0; i < kMicrobatches; ++i) batches.push_back(random_batch(c, 2, 8, 60 + i));
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel whole(c, backend, 7);
  randomize_parameters(whole.parameters(), 11);
  dist::Communicator& pipeline = *groups.pipeline_model_parallel;
  const PipelineStage stage = pipeline_stage(c.num_layers, {layout.pp, {}, {}}, pipeline.rank());
  GptModel model(c, backend, std::nullopt,
                 {layout.tp > 1 ? groups.tensor_model_parallel.get() : nullptr, layout.sequence_parallel},
                 {stage, groups.embedding.get()});
  for (const ParameterEntry& e : model.parameters().entries())
    model.parameters().write_param(
        e, shard_tensor(e, model.parameters().tensor_parallel(), whole.parameters().read_param(whole.parameters().entry(e.name))));
  model.parameters().zero_grads();
  Result r;
  if (layout.pp > 1) {
    PipelineExecutor executor(model, pipeline);
    size_t next = 0;
    r.loss = executor.train(kMicrobatches, [&] { return host_batch(batches.at(next++)); }, dropout_of, kMicrobatches);
    model.all_reduce_embedding_grads();
  } else {
    for (int64_t i = 0; i < kMicrobatches; ++i) {
      const LossSum s = model.forward_backward(micro_batch(batches[static_cast<size_t>(i)]), dropout_of(i), kMicrobatches);
      r.loss.loss_sum += s.loss_sum;
      r.loss.token_count += s.token_count;
    }
  }
  model.all_reduce_partial_grads();
  r.grads = read_all_grads(model.parameters());
  return r;
}

dist::ProcessGroups groups_for(const Layout& l) {
  dist::ParallelFlags flags;
  flags.tensor_model_parallel_size = l.tp;
  flags.pipeline_model_parallel_size = l.pp;
  return dist::make_process_groups(runtime(), dist::ParallelLayout(flags, runtime().world_size()));
}

}  // namespace

TEST_CASE("recomputation gives bit-identical losses and gradients under TP, SP and PP", "[dist][recompute]") {
  for (const Layout& layout : layouts(runtime().world_size())) {
    dist::ProcessGroups groups = groups_for(layout);
    for (const GptConfig& base : {gpt2_like_config(), llama_like_config()}) {
      const GptConfig c = four_layers_with_dropout(base);
      const Result plain = iteration(c, layout, groups);
      GptConfig selective = c;
      selective.recompute_granularity = RecomputeGranularity::kSelective;
      // --recompute-modules core_attn layernorm mlp: the norm outputs rebuilt (and all-gathered
      // again under SP), the MLP's forward rerun with its collectives.
      GptConfig modules = selective;
      modules.recompute_layernorm = true;
      modules.recompute_mlp = true;
      for (const GptConfig& variant : {full(c, RecomputeMethod::kUniform, 2), full(c, RecomputeMethod::kBlock, 1),
                                       selective, modules}) {
        INFO("TP " << layout.tp << " PP " << layout.pp << (layout.sequence_parallel ? " SP" : "") << ", "
                   << to_string(variant.recompute_granularity) << " " << to_string(variant.recompute_method) << " "
                   << variant.recompute_num_layers << (variant.recompute_mlp ? " layernorm mlp" : "")
                   << (base.group_query_attention ? ", Llama-like" : ", GPT-2-like"));
        const Result got = iteration(variant, layout, groups);
        CHECK(got.loss.loss_sum == plain.loss.loss_sum);
        CHECK(got.loss.token_count == plain.loss.token_count);
        CHECK(got.grads.size() == plain.grads.size());
        CHECK(std::memcmp(got.grads.data(), plain.grads.data(), got.grads.size() * sizeof(float)) == 0);
      }
    }
  }
}
