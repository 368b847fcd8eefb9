// Context parallelism in the GPT model: each context-parallel rank trains on its two chunks of
// every sequence (context_parallel_split.hpp) with ring attention, and the sums of the ranks'
// losses and gradients are the single-rank model's on the whole sequences — GPT-2-like (learned
// positions) and Llama-like (rotary, grouped-query attention), alone and with tensor and
// sequence parallelism, and under selective and full recomputation. Every rank builds the
// single-rank reference itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dist/dist_testing.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/context_parallel_split.hpp"
#include "model/gpt_model.hpp"
#include "model/model_testing.hpp"
#include "model/parameter_sharding.hpp"

using namespace mgt;
using namespace mgt::model_testing;
using mgt::dist_test::runtime;

namespace {

double relative_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

// Two micro-batches, their loss summed (--calculate-per-token-loss): the ranks' sums add up to
// the whole sequences' exactly, whatever each rank's share of the loss mask.
LossSum train_iteration(GptModel& model, const std::vector<RefBatch>& batches, int cp_size, int cp_rank) {
  model.parameters().zero_grads();
  LossSum total;
  for (size_t i = 0; i < batches.size(); ++i) {
    const ContextParallelBatch part = split_for_context_parallel_rank(micro_batch(batches[i]), cp_size, cp_rank);
    const LossSum loss = model.forward_backward(part.view(), {1234, 10 + i}, 2, LossReduction::kSum);
    total.loss_sum += loss.loss_sum;
    total.token_count += loss.token_count;
  }
  model.all_reduce_partial_grads();
  return total;
}

}  // namespace

TEST_CASE("context-parallel GPT reproduces the single-rank loss and gradients", "[dist][cp]") {
  const int world = runtime().world_size();
  std::vector<std::pair<int, bool>> layouts = {{1, false}};  // (tensor-parallel size, sequence parallel)
  if (world % 2 == 0 && world >= 4) layouts.insert(layouts.end(), {{2, false}, {2, true}});
  for (const auto& [tp, sequence_parallel] : layouts) {
    dist::ParallelFlags flags;
    flags.tensor_model_parallel_size = tp;
    flags.context_parallel_size = world / tp;
    dist::ProcessGroups groups = dist::make_process_groups(runtime(), dist::ParallelLayout(flags, world));
    dist::Communicator& cp = *groups.context_parallel;
    // The two model styles, and each with a recomputation (the ring runs again in the backward).
    for (const auto& [llama, recompute] :
         {std::pair{false, RecomputeGranularity::kNone}, std::pair{true, RecomputeGranularity::kNone},
          std::pair{false, RecomputeGranularity::kSelective}, std::pair{true, RecomputeGranularity::kFull}}) {
      GptConfig c = llama ? llama_like_config() : gpt2_like_config();
      c.max_position_embeddings = 16;
      c.recompute_granularity = recompute;
      INFO((llama ? "Llama-like" : "GPT-2-like") << ", CP " << cp.size() << ", TP " << tp
                                                 << (sequence_parallel ? ", sequence parallel" : "")
                                                 << ", recompute " << static_cast<int>(recompute));
      const std::vector<RefBatch> batches = {random_batch(c, 2, 8, 3), random_batch(c, 2, 8, 4)};
      const auto backend = make_backend("cpu");
      GptModel reference(c, *backend, 7);
      randomize_parameters(reference.parameters(), 11);
      reference.parameters().zero_grads();
      LossSum want;
      for (size_t i = 0; i < batches.size(); ++i) {
        const LossSum loss = reference.forward_backward(micro_batch(batches[i]), {1234, 10 + i}, 2, LossReduction::kSum);
        want.loss_sum += loss.loss_sum;
        want.token_count += loss.token_count;
      }

      TensorParallelism tensor;
      if (tp > 1) tensor = {groups.tensor_model_parallel.get(), sequence_parallel};
      GptModel model(c, *backend, std::nullopt, tensor);
      model.set_context_parallel(&cp);
      CHECK(model.context_parallel() == (cp.size() > 1));
      shard_parameters(reference.parameters(), model.parameters());
      LossSum got = train_iteration(model, batches, cp.size(), cp.rank());
      // The context-parallel ranks' shares of the loss and of the gradients, summed (the trainer
      // reduces them over the data-parallel group with context parallelism).
      double sums[2] = {got.loss_sum, got.token_count};
      cp.all_reduce(std::span<double>(sums), dist::ReduceOp::Sum);
      cp.all_reduce(model.parameters().grads(), dist::ReduceOp::Sum);
      CHECK(sums[1] == want.token_count);
      CHECK(std::abs(sums[0] - want.loss_sum) <= 1e-5 * std::abs(want.loss_sum));

      double worst = 0.0;
      std::string worst_name;
      for (const ParameterEntry& e : model.parameters().entries()) {
        const std::vector<float> whole = reference.parameters().read_grad(reference.parameters().entry(e.name));
        // This tensor-parallel rank's part of the reference gradient.
        const std::vector<float> want_shard =
            shard_tensor(e, {tp, tp > 1 ? groups.tensor_model_parallel->rank() : 0}, whole);
        const double error = relative_difference(model.parameters().read_grad(e), want_shard);
        if (error > worst || worst_name.empty()) {
          worst = error;
          worst_name = e.name;
        }
      }
      INFO("largest gradient difference: " << worst_name << ", relative " << worst);
      CHECK(worst <= 1e-5);
    }
  }
}
