// The pieces of data-parallel training that communicate: the distributed optimizer's shards of
// the flat buffer, and AdamW over a data-parallel group, plain and distributed, against one rank
// holding the summed gradients. Run alone and under mpiexec with 1, 2 and 4 ranks.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "dist/backend_memory_mover.hpp"
#include "dist/buffer_shards.hpp"
#include "dist/dist_testing.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_parameters.hpp"
#include "train/adamw_optimizer.hpp"

using namespace mgt;
using mgt::dist_test::runtime;

namespace {

// The data-parallel group of a layout that is all data parallelism, moving the CPU backend's
// buffers through a BackendMemoryMover as mgt-train's groups do.
struct DataParallelGroup {
  std::unique_ptr<Backend> backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  dist::BackendMemoryMover mover{backend};
  dist::ProcessGroups groups;
  DataParallelGroup() {
    const dist::ParallelLayout layout(dist::ParallelFlags{}, runtime().world_size());
    groups = dist::make_process_groups(runtime(), layout, &mover);
  }
  dist::Communicator& comm() const { return *groups.data_parallel; }
};

// Exactly representable values, so that sums do not depend on their order.
float value_of(int rank, std::int64_t i) { return static_cast<float>(rank * 1000 + i % 997); }

GptConfig tiny_config() {
  GptConfig config;
  config.num_layers = 1;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 17 * 3;  // tensors of odd sizes, so shards split inside them
  return config;
}

// Gradients of rank `rank` for step `step`: varied magnitudes, zero in the alignment gaps.
void fill_gradients(GptParameters& params, int rank, int step) {
  for (const ParameterEntry& e : params.entries()) {
    std::vector<float> g(static_cast<std::size_t>(e.numel()));
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = 0.05f * std::sin(0.37f * static_cast<float>(i + e.offset) + 1.3f * static_cast<float>(rank) +
                              0.7f * static_cast<float>(step));
    params.backend().copy_from_host(g, params.grad(e));
  }
}

std::vector<float> all_params(const GptParameters& params) {
  std::vector<float> out;
  for (const ParameterEntry& e : params.entries()) {
    const std::vector<float> p = params.read_param(e);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

}  // namespace

TEST_CASE("data-parallel shards cover the buffer in rank order", "[dist][data-parallel]") {
  for (std::int64_t size : {0, 1, 3, 64, 130, 4096 + 5}) {
    for (int ranks : {1, 2, 3, 4, 8}) {
      INFO("size " << size << ", ranks " << ranks);
      std::int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const BufferShard s = data_parallel_shard(size, ranks, r);
        CHECK(s.begin == next);
        CHECK(s.size() >= size / ranks);
        // Only the last rank takes more than its even part: the remainder, fewer than `ranks`.
        if (r + 1 < ranks) CHECK(s.size() == size / ranks);
        next = s.end;
      }
      CHECK(next == size);
    }
  }
  // Powers of two up to 64 divide every parameter buffer (its alignment): even shards.
  CHECK(data_parallel_shard(640, 4, 3).size() == 160);
}

TEST_CASE("reduce-scatter and all-gather of buffer shards", "[dist][data-parallel]") {
  DataParallelGroup dp;
  dist::Communicator& comm = dp.comm();
  const int ranks = comm.size();
  const int me = comm.rank();
  for (std::int64_t size : {std::int64_t{0}, std::int64_t{1}, std::int64_t{ranks + 1}, std::int64_t{64 * 3 + 3}}) {
    INFO("buffer of " << size << " on " << ranks << " ranks");
    DeviceBuffer buffer(dp.backend, size);
    std::vector<float> host(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i) host[static_cast<std::size_t>(i)] = value_of(me, i);
    dp.backend.copy_from_host(host, buffer.view());

    reduce_scatter_shards(comm, buffer.view());
    dp.backend.copy_to_host(ConstFloatView(buffer.view()), std::span<float>(host));
    const BufferShard mine = data_parallel_shard(size, ranks, me);
    std::int64_t wrong = 0;
    for (std::int64_t i = mine.begin; i < mine.end; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < ranks; ++r) sum += value_of(r, i);
      wrong += host[static_cast<std::size_t>(i)] != sum;
    }
    CHECK(wrong == 0);

    // Each rank writes -(i + 1) into its own shard only; the gather makes the buffer whole.
    for (std::int64_t i = 0; i < size; ++i)
      host[static_cast<std::size_t>(i)] = i >= mine.begin && i < mine.end ? -static_cast<float>(i + 1) : 12345.0f;
    dp.backend.copy_from_host(host, buffer.view());
    all_gather_shards(comm, buffer.view());
    dp.backend.copy_to_host(ConstFloatView(buffer.view()), std::span<float>(host));
    wrong = 0;
    for (std::int64_t i = 0; i < size; ++i) wrong += host[static_cast<std::size_t>(i)] != -static_cast<float>(i + 1);
    CHECK(wrong == 0);
  }
}

TEST_CASE("AdamW over data-parallel ranks, plain and distributed, steps as one rank with the summed gradients",
          "[dist][data-parallel]") {
  DataParallelGroup dp;
  dist::Communicator& comm = dp.comm();
  const int ranks = comm.size();
  const GptConfig config = tiny_config();
  // clip_grad small enough that every step clips: the norm must be the whole model's.
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.05};

  GptParameters reference(config, dp.backend);
  GptParameters plain(config, dp.backend);
  GptParameters sharded(config, dp.backend);
  for (GptParameters* p : {&reference, &plain, &sharded}) p->initialize(11);
  AdamWOptimizer reference_optimizer(reference, settings);
  AdamWOptimizer plain_optimizer(plain, settings, comm, false);
  AdamWOptimizer sharded_optimizer(sharded, settings, comm, true);
  CHECK_FALSE(plain_optimizer.distributed());
  CHECK(sharded_optimizer.distributed());
  CHECK(sharded_optimizer.shard().size() == data_parallel_shard(sharded.params().size(), ranks, comm.rank()).size());

  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    // The reference holds what the reduction gives: the sum of every rank's gradients.
    std::vector<float> summed(static_cast<std::size_t>(reference.params().size()), 0.0f);
    for (int r = 0; r < ranks; ++r) {
      fill_gradients(reference, r, step);
      std::vector<float> g(summed.size());
      dp.backend.copy_to_host(ConstFloatView(reference.grads()), std::span<float>(g));
      for (std::size_t i = 0; i < g.size(); ++i) summed[i] += g[i];
    }
    dp.backend.copy_from_host(summed, reference.grads());
    fill_gradients(plain, comm.rank(), step);
    fill_gradients(sharded, comm.rank(), step);

    plain_optimizer.reduce_gradients();
    sharded_optimizer.reduce_gradients();
    const OptimizerStep a = reference_optimizer.step(1e-2, 0.1);
    const OptimizerStep b = plain_optimizer.step(1e-2, 0.1);
    const OptimizerStep c = sharded_optimizer.step(1e-2, 0.1);
    CHECK(a.applied);
    CHECK(b.applied);
    CHECK(c.applied);
    CHECK(a.grad_norm > settings.clip_grad);
    CHECK(b.grad_norm == Approx(a.grad_norm).epsilon(1e-6));
    CHECK(c.grad_norm == Approx(a.grad_norm).epsilon(1e-6));
    CHECK(max_abs_difference(all_params(plain), all_params(reference)) < 1e-6);
    CHECK(max_abs_difference(all_params(sharded), all_params(reference)) < 1e-6);
  }

  // The checkpoint's view of the moments: whole tensors on data-parallel rank 0.
  sharded_optimizer.collect_state();
  if (comm.rank() == 0) {
    for (const ParameterEntry& e : sharded.entries()) {
      INFO(e.name);
      CHECK(max_abs_difference(sharded_optimizer.read_exp_avg(e), reference_optimizer.read_exp_avg(e)) < 1e-7);
      CHECK(max_abs_difference(sharded_optimizer.read_exp_avg_sq(e), reference_optimizer.read_exp_avg_sq(e)) < 1e-9);
    }
  } else {
    CHECK_THROWS(sharded_optimizer.read_exp_avg(sharded.entries()[0]));
  }
  sharded_optimizer.release_collected_state();

  // A checkpoint's whole tensors restore every rank's shard.
  GptParameters restored(config, dp.backend);
  AdamWOptimizer restored_optimizer(restored, settings, comm, true);
  for (const ParameterEntry& e : restored.entries()) {
    restored_optimizer.write_exp_avg(e, reference_optimizer.read_exp_avg(e));
    restored_optimizer.write_exp_avg_sq(e, reference_optimizer.read_exp_avg_sq(e));
  }
  restored_optimizer.collect_state();
  if (comm.rank() == 0) {
    for (const ParameterEntry& e : restored.entries()) {
      INFO(e.name);
      CHECK(restored_optimizer.read_exp_avg(e) == reference_optimizer.read_exp_avg(e));
      CHECK(restored_optimizer.read_exp_avg_sq(e) == reference_optimizer.read_exp_avg_sq(e));
    }
  }
  restored_optimizer.release_collected_state();
}

TEST_CASE("a non-finite gradient on one rank skips the step on every rank", "[dist][data-parallel]") {
  DataParallelGroup dp;
  dist::Communicator& comm = dp.comm();
  const GptConfig config = tiny_config();
  for (bool distributed : {false, true}) {
    INFO((distributed ? "distributed" : "plain") << " optimizer");
    GptParameters params(config, dp.backend);
    params.initialize(3);
    AdamWOptimizer optimizer(params, AdamWSettings{}, comm, distributed);
    const std::vector<float> before = all_params(params);
    fill_gradients(params, comm.rank(), 0);
    // On the last rank only, in the first tensor (rank 0's shard when distributed).
    if (comm.rank() == comm.size() - 1)
      dp.backend.fill(params.grads().first(1), std::numeric_limits<float>::quiet_NaN());
    optimizer.reduce_gradients();
    const OptimizerStep step = optimizer.step(1e-2, 0.1);
    CHECK_FALSE(step.applied);
    CHECK(std::isnan(step.grad_norm));
    CHECK(optimizer.steps() == 0);
    CHECK(all_params(params) == before);
  }
}
