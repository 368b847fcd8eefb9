// The pieces of tensor-parallel training outside the model: AdamW over tensor-parallel shards
// (the norm counts replicated tensors once and sums over the group; a non-finite loss on one
// rank skips the step on all), composed with data parallelism and the distributed optimizer, and
// the gathering of whole tensors for checkpoints. Run alone and under mpiexec with 1, 2 and 4
// ranks: TP 2 where the world is even (with DP 2 on 4 ranks), else TP 1.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "dist/backend_memory_mover.hpp"
#include "dist/dist_testing.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_parameters.hpp"
#include "model/parameter_sharding.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/whole_train_state.hpp"

using namespace mgt;
using mgt::dist_test::runtime;

namespace {

struct TensorParallelGroups {
  std::unique_ptr<Backend> backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  dist::BackendMemoryMover mover{backend};
  dist::ProcessGroups groups;
  TensorParallelGroups() {
    dist::ParallelFlags flags;
    flags.tensor_model_parallel_size = runtime().world_size() % 2 == 0 ? 2 : 1;
    const dist::ParallelLayout layout(flags, runtime().world_size());
    groups = dist::make_process_groups(runtime(), layout, &mover);
  }
  dist::Communicator& tp() const { return *groups.tensor_model_parallel; }
  dist::Communicator& dp() const { return *groups.data_parallel; }
  TensorParallelRank tp_rank() const { return {tp().size(), tp().rank()}; }
};

GptConfig tiny_config() {
  GptConfig config;
  config.num_layers = 2;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.ffn_hidden_size = 12;
  config.seq_length = 4;
  config.padded_vocab_size = 18;  // two shards of 9 rows: tensors of odd sizes
  return config;
}

// The whole model's gradients for `step`, a function of (tensor, global element): varied
// magnitudes, large enough that clipping applies.
std::vector<float> whole_gradient(const ParameterEntry& e, int step) {
  std::vector<float> g(static_cast<std::size_t>(e.global_numel()));
  const float salt = static_cast<float>(e.name.size() % 7);
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = 0.05f * std::sin(0.37f * static_cast<float>(i) + salt + 0.7f * static_cast<float>(step));
  return g;
}

// `params`' gradients: its shard of the whole gradients on data-parallel rank 0, zero on the
// others (the data-parallel sum is then the whole gradient).
void fill_gradients(GptParameters& params, int step, bool holds_batch) {
  for (const ParameterEntry& e : params.entries()) {
    std::vector<float> g = shard_tensor(e, params.tensor_parallel(), whole_gradient(e, step));
    if (!holds_batch) std::fill(g.begin(), g.end(), 0.0f);
    params.backend().copy_from_host(g, params.grad(e));
  }
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

}  // namespace

TEST_CASE("AdamW over tensor-parallel shards steps as one rank, counting replicated tensors once",
          "[dist][tp]") {
  TensorParallelGroups g;
  const GptConfig config = tiny_config();
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.05};
  for (bool distributed : {false, true}) {
    INFO((distributed ? "distributed" : "plain") << " optimizer, TP " << g.tp().size() << " x DP " << g.dp().size());
    GptParameters reference(config, g.backend);
    GptParameters shard(config, g.backend, g.tp_rank());
    reference.initialize(5);
    shard.initialize(5);
    AdamWOptimizer reference_optimizer(reference, settings);
    AdamWOptimizer optimizer(shard, settings, g.dp(), distributed, &g.tp());
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step);
      fill_gradients(reference, step, true);
      fill_gradients(shard, step, g.dp().rank() == 0);
      optimizer.reduce_gradients();
      const OptimizerStep a = reference_optimizer.step(1e-2, 0.1);
      const OptimizerStep b = optimizer.step(1e-2, 0.1);
      CHECK(a.applied);
      CHECK(b.applied);
      CHECK(a.grad_norm > settings.clip_grad);
      CHECK(b.grad_norm == Approx(a.grad_norm).epsilon(1e-6));
      double worst = 0.0;
      for (const ParameterEntry& e : shard.entries())
        worst = std::max(worst, max_abs_difference(shard.read_param(e),
                                                   shard_tensor(e, shard.tensor_parallel(),
                                                                reference.read_param(reference.entry(e.name)))));
      CHECK(worst < 1e-6);
    }

    // A checkpoint's whole tensors, gathered on tensor-parallel rank 0 of data-parallel rank 0
    // (after the distributed optimizer collected its shards there).
    optimizer.collect_state();
    std::optional<WholeTrainState> whole;
    if (g.dp().rank() == 0) whole = gather_whole_train_state(shard, optimizer, g.tp(), true);
    optimizer.release_collected_state();
    CHECK(whole.has_value() == (g.dp().rank() == 0 && g.tp().rank() == 0));
    if (whole) {
      CHECK(whole->table.entries.size() == reference.entries().size());
      for (const ParameterEntry& e : whole->table.entries) {
        INFO(e.name);
        const ParameterEntry& r = reference.entry(e.name);
        CHECK(e.local_shape == r.global_shape);
        CHECK(max_abs_difference(whole->weights.at(e.name), reference.read_param(r)) < 1e-6);
        CHECK(max_abs_difference(whole->exp_avg.at(e.name), reference_optimizer.read_exp_avg(r)) < 1e-7);
        CHECK(max_abs_difference(whole->exp_avg_sq.at(e.name), reference_optimizer.read_exp_avg_sq(r)) < 1e-9);
      }
    }
  }
}

TEST_CASE("a non-finite loss on one tensor-parallel rank skips the step on every rank", "[dist][tp]") {
  TensorParallelGroups g;
  const GptConfig config = tiny_config();
  for (bool distributed : {false, true}) {
    INFO((distributed ? "distributed" : "plain") << " optimizer");
    GptParameters params(config, g.backend, g.tp_rank());
    params.initialize(3);
    AdamWOptimizer optimizer(params, AdamWSettings{}, g.dp(), distributed, &g.tp());
    const std::vector<float> before = params.read_param(params.entries()[0]);
    fill_gradients(params, 0, g.dp().rank() == 0);
    optimizer.reduce_gradients();
    // The last tensor-parallel rank of each replica saw a non-finite loss (with one rank per
    // group, every rank did).
    const OptimizerStep step = optimizer.step(1e-2, 0.1, g.tp().rank() != g.tp().size() - 1);
    CHECK_FALSE(step.applied);
    CHECK(std::isnan(step.grad_norm));
    CHECK(optimizer.steps() == 0);
    CHECK(params.read_param(params.entries()[0]) == before);
  }
}
