// Tensor and sequence parallelism in the GPT model: with the parameters of a single-rank model
// sharded over a tensor-parallel group, every rank's loss and the gathered gradients equal the
// single-rank model's, with dropout on (mgt draws the same masks in every layout). Every rank
// also builds the single-rank reference itself, so the comparisons need no extra communication.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dist/dist_testing.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_model.hpp"
#include "model/kv_cache.hpp"
#include "model/model_testing.hpp"
#include "model/parameter_sharding.hpp"
#include "model/tensor_parallel_mappings.hpp"

using namespace mgt;
using namespace mgt::model_testing;
using mgt::dist_test::runtime;

namespace {

constexpr double kTolerance = 1e-5;

// GPT-2-like: LayerNorm, erf GELU, learned positions, biases, tied output; sizes divisible by 4.
GptConfig gpt2_tp_config() {
  GptConfig c = gpt2_like_config();
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  return c;
}

// Llama-like: RMSNorm, SwiGLU, partial RoPE, no biases, untied output, 8 heads in 4 query groups
// with kv_channels != hidden / heads.
GptConfig llama_tp_config() {
  GptConfig c = llama_like_config();
  c.num_attention_heads = 8;
  c.num_query_groups = 4;
  c.kv_channels = 4;
  c.ffn_hidden_size = 24;
  return c;
}

// SwiGLU and grouped-query attention with biases (split SwiGLU and QKV biases, row-parallel
// biases under sequence parallelism), LayerNorm with its bias, tied output.
GptConfig llama_with_biases_config() {
  GptConfig c = llama_tp_config();
  c.add_bias_linear = true;
  c.untie_embeddings_and_output_weights = false;
  c.normalization = Normalization::kLayerNorm;
  return c;
}

// --qk-layernorm by LayerNorm (weight and bias) after the grouped QKV projection and before
// RoPE: each rank normalises its own heads, and the norms' gradients are summed over the ranks.
GptConfig llama_qk_layernorm_config() {
  GptConfig c = llama_tp_config();
  c.normalization = Normalization::kLayerNorm;
  c.qk_layernorm = true;
  return c;
}

GptConfig with_dropout(GptConfig c) {
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.2;
  return c;
}

struct Case {
  std::string name;
  GptConfig config;
};

GptConfig with_recompute(GptConfig c, RecomputeGranularity granularity) {
  c.recompute_granularity = granularity;
  return c;
}

std::vector<Case> cases() {
  return {{"GPT-2-like", with_dropout(gpt2_tp_config())},
          {"Llama-like", with_dropout(llama_tp_config())},
          {"Llama-like with biases", with_dropout(llama_with_biases_config())},
          {"Llama-like with LayerNorm q/k norms", with_dropout(llama_qk_layernorm_config())},
          {"GPT-2-like without dropout", gpt2_tp_config()},
          {"GPT-2-like, selective recompute",
           with_recompute(with_dropout(gpt2_tp_config()), RecomputeGranularity::kSelective)},
          {"Llama-like, full recompute",
           with_recompute(with_dropout(llama_tp_config()), RecomputeGranularity::kFull)}};
}

// The tensor-parallel sizes a world can run besides 1: every divisor of the world size.
std::vector<int> tensor_parallel_sizes(int world) {
  std::vector<int> sizes;
  for (int tp = 2; tp <= world; ++tp)
    if (world % tp == 0) sizes.push_back(tp);
  return sizes;
}

dist::ProcessGroups groups_for(int tp) {
  dist::ParallelFlags flags;
  flags.tensor_model_parallel_size = tp;
  return dist::make_process_groups(runtime(), dist::ParallelLayout(flags, runtime().world_size()));
}

// max |got − want| / max |want| over a tensor (absolute when want is all zero).
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

double relative_difference(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), 1e-30);
}

// The whole tensor from every rank's shard: an all-gather over the group, then each shard put in
// its places.
std::vector<float> gather_tensor(dist::Communicator& group, const ParameterEntry& entry,
                                 const std::vector<float>& shard) {
  std::vector<float> all(shard.size() * static_cast<size_t>(group.size()));
  group.all_gather(std::span<const float>(shard), std::span<float>(all));
  std::vector<float> whole(static_cast<size_t>(entry.global_numel()));
  for (int r = 0; r < group.size(); ++r) {
    const std::span<const float> piece(all.data() + static_cast<size_t>(r) * shard.size(),
                                       shard.size());
    unshard_tensor(entry, {group.size(), r}, piece, whole);
  }
  return whole;
}

struct TrainResult {
  double loss_sum = 0.0;
  double tokens = 0.0;
};

// Two micro-batches of one iteration (gradients accumulate), as a trainer runs them.
TrainResult train_iteration(GptModel& model, const std::vector<RefBatch>& batches) {
  model.parameters().zero_grads();
  TrainResult r;
  for (size_t i = 0; i < batches.size(); ++i) {
    const LossSum loss = model.forward_backward(micro_batch(batches[i]), {1234, 10 + i},
                                                static_cast<int64_t>(batches.size()));
    r.loss_sum += loss.loss_sum;
    r.tokens += loss.token_count;
  }
  model.all_reduce_partial_grads();
  return r;
}

}  // namespace

TEST_CASE("tensor-parallel GPT reproduces the single-rank loss and gradients", "[dist][tp]") {
  const int world = runtime().world_size();
  for (const int tp : tensor_parallel_sizes(world)) {
    dist::ProcessGroups groups = groups_for(tp);
    dist::Communicator& group = *groups.tensor_model_parallel;
    for (const Case& test : cases()) {
      for (const bool sequence_parallel : {false, true}) {
        INFO(test.name << ", TP " << tp << (sequence_parallel ? ", sequence parallel" : ""));
        const GptConfig& c = test.config;
        const std::vector<RefBatch> batches = {random_batch(c, 2, 8, 3), random_batch(c, 2, 8, 4)};

        const auto backend_owner = make_backend("cpu");

        Backend& backend = *backend_owner;
        GptModel reference(c, backend, 7);
        randomize_parameters(reference.parameters(), 11);
        const TrainResult want = train_iteration(reference, batches);

        GptModel model(c, backend, std::nullopt, {&group, sequence_parallel});
        CHECK(model.sequence_parallel() == sequence_parallel);
        // The sequence slices' gradients are summed over the tensor-parallel group after the
        // data-parallel reduction: none holds a data-parallel bucket back.
        for (const ParameterEntry& e : model.parameters().entries()) CHECK_FALSE(model.gradient_finalized_later(e));
        shard_parameters(reference.parameters(), model.parameters());
        const TrainResult got = train_iteration(model, batches);

        CHECK(got.tokens == want.tokens);
        const double loss_error = relative_difference(got.loss_sum, want.loss_sum);
        INFO("loss " << got.loss_sum << " vs " << want.loss_sum << ", relative " << loss_error);
        CHECK(loss_error <= kTolerance);

        double worst = 0.0;
        std::string worst_name;
        for (const ParameterEntry& e : model.parameters().entries()) {
          const std::vector<float> whole =
              gather_tensor(group, e, model.parameters().read_grad(e));
          const double error = relative_difference(
              whole, reference.parameters().read_grad(reference.parameters().entry(e.name)));
          if (error > worst || worst_name.empty()) {
            worst = error;
            worst_name = e.name;
          }
        }
        INFO("largest gradient difference: " << worst_name << ", relative " << worst);
        CHECK(worst <= kTolerance);
        if (group.rank() == 0 && runtime().rank() == 0) {
          std::printf("TP %d%s %-32s loss rel. diff %.2e, worst grad rel. diff %.2e (%s)\n", tp,
                      sequence_parallel ? " SP" : "   ", test.name.c_str(), loss_error, worst,
                      worst_name.c_str());
        }
      }
    }
  }
}

TEST_CASE("tensor-parallel GPT evaluation and generation match the single-rank model",
          "[dist][tp]") {
  const int world = runtime().world_size();
  for (const int tp : tensor_parallel_sizes(world)) {
    dist::ProcessGroups groups = groups_for(tp);
    dist::Communicator& group = *groups.tensor_model_parallel;
    for (const Case& test : cases()) {
      INFO(test.name << ", TP " << tp);
      const GptConfig& c = test.config;
      const RefBatch batch = random_batch(c, 2, 8, 5);
      const auto backend_owner = make_backend("cpu");
      Backend& backend = *backend_owner;
      GptModel reference(c, backend, 7);
      randomize_parameters(reference.parameters(), 13);
      // Sequence parallelism applies to training passes only; evaluation runs without it.
      GptModel model(c, backend, std::nullopt, {&group, true});
      shard_parameters(reference.parameters(), model.parameters());

      const ForwardOutput want = reference.forward_only(micro_batch(batch), true, true);
      const ForwardOutput got = model.forward_only(micro_batch(batch), true, true);
      CHECK(relative_difference(got.loss.loss_sum, want.loss.loss_sum) <= kTolerance);
      CHECK(relative_difference(got.losses, want.losses) <= kTolerance);
      CHECK(relative_difference(got.logits, want.logits) <= kTolerance);
      CHECK(got.argmax == want.argmax);

      const ForwardOutput selected_want = reference.forward_selected(micro_batch(batch), true);
      const ForwardOutput selected_got = model.forward_selected(micro_batch(batch), true);
      CHECK(relative_difference(selected_got.losses, selected_want.losses) <= kTolerance);
      CHECK(selected_got.argmax == selected_want.argmax);

      // Generation: a prompt of 5 tokens, then 2 single tokens through the key/value cache.
      KvCache want_cache(backend, c, 2, 8);
      KvCache got_cache(backend, c, 2, 8, model.parameters().tensor_parallel());
      std::vector<int64_t> prompt;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 5; ++i)
          prompt.push_back(batch.tokens[static_cast<size_t>(b * 8 + i)]);
      CHECK(relative_difference(model.forward_cached(prompt, 5, got_cache),
                                reference.forward_cached(prompt, 5, want_cache)) <= kTolerance);
      const std::vector<int64_t> next = {3, 9};
      CHECK(relative_difference(model.forward_cached(next, 1, got_cache),
                                reference.forward_cached(next, 1, want_cache)) <= kTolerance);
    }
  }
}

TEST_CASE("a tensor-parallel group of one is the single-rank model, bit for bit", "[dist][tp]") {
  // Every world has groups of one: the TP = 1 layout's tensor-parallel groups.
  dist::ProcessGroups groups = groups_for(1);
  for (const Case& test : cases()) {
    INFO(test.name);
    const RefBatch batch = random_batch(test.config, 2, 8, 6);
    const auto backend_owner = make_backend("cpu");
    Backend& backend = *backend_owner;
    GptModel plain(test.config, backend, 7);
    GptModel grouped(test.config, backend, 7, {groups.tensor_model_parallel.get(), true});
    CHECK_FALSE(grouped.sequence_parallel());
    const TrainResult a = train_iteration(plain, {batch});
    const TrainResult b = train_iteration(grouped, {batch});
    CHECK(a.loss_sum == b.loss_sum);
    CHECK(read_all_grads(plain.parameters()) == read_all_grads(grouped.parameters()));
  }
}

TEST_CASE("tensor-parallel mappings: each forward and its backward", "[dist][tp]") {
  const int world = runtime().world_size();
  for (const int tp : tensor_parallel_sizes(world)) {
    dist::ProcessGroups groups = groups_for(tp);
    dist::Communicator& group = *groups.tensor_model_parallel;
    const int rank = group.rank();
    const auto backend_owner = make_backend("cpu");
    Backend& backend = *backend_owner;
    const TensorParallelMappings map(backend, &group);
    REQUIRE(map.active());
    INFO("TP " << tp << ", rank " << rank);

    // Values that tell ranks and positions apart, exactly representable, sums exact.
    const auto value = [](int r, int64_t i) { return static_cast<float>(100 * (r + 1) + i); };
    const int64_t rows = 3;
    const int64_t cols = 2;
    const int64_t n = rows * cols;
    std::vector<float> mine(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = value(rank, i);
    DeviceBuffer local(backend, n);
    DeviceBuffer whole(backend, n * tp);
    const auto upload = [&](DeviceBuffer& d, const std::vector<float>& v) {
      backend.copy_from_host(v, d.view());
    };
    const auto download = [&](const DeviceBuffer& d) {
      std::vector<float> v(static_cast<size_t>(d.size()));
      backend.copy_to_host(d.view(), v);
      return v;
    };

    // Last dim: whole[r, j·cols + c] = rank j's local[r, c]; the split takes this rank's columns.
    std::vector<float> by_columns(static_cast<size_t>(n * tp));
    for (int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < tp; ++j)
        for (int64_t c = 0; c < cols; ++c)
          by_columns[static_cast<size_t>((r * tp + j) * cols + c)] = value(j, r * cols + c);
    upload(local, mine);
    map.gather_from_tensor_region_forward(local.view(), rows, whole.view());
    CHECK(download(whole) == by_columns);
    backend.fill(local.view(), 0.0f);
    map.gather_from_tensor_region_backward(whole.view(), rows, local.view());
    CHECK(download(local) == mine);
    map.scatter_to_tensor_region_forward(whole.view(), rows, local.view());
    CHECK(download(local) == mine);
    backend.fill(whole.view(), 0.0f);
    map.scatter_to_tensor_region_backward(local.view(), rows, whole.view());
    CHECK(download(whole) == by_columns);

    // First dim: whole = the ranks' blocks in rank order; the reduce-scatter sums them.
    std::vector<float> by_rows;
    for (int j = 0; j < tp; ++j)
      for (int64_t i = 0; i < n; ++i) by_rows.push_back(value(j, i));
    upload(local, mine);
    map.gather_from_sequence_parallel_region_forward(local.view(), whole.view());
    CHECK(download(whole) == by_rows);
    map.scatter_to_sequence_parallel_region_backward(local.view(), whole.view());
    CHECK(download(whole) == by_rows);
    map.reduce_scatter_to_sequence_parallel_region_backward(local.view(), whole.view());
    CHECK(download(whole) == by_rows);
    map.scatter_to_sequence_parallel_region_forward(whole.view(), local.view());
    CHECK(download(local) == mine);
    // Every rank contributes `by_rows`: block `rank` of the sum is tp times this rank's values.
    std::vector<float> summed = mine;
    for (float& x : summed) x *= static_cast<float>(tp);
    map.gather_from_sequence_parallel_region_backward(whole.view(), local.view());
    CHECK(download(local) == summed);
    map.reduce_scatter_to_sequence_parallel_region_forward(whole.view(), local.view());
    CHECK(download(local) == summed);
    // The same reduction of products made block by block (the pipelined ring): rank j's product
    // of block b is value(j, b·n + i); block `rank` sums them over j. Each block asked for once.
    std::vector<float> ring_sum(static_cast<size_t>(n), 0.0f);
    for (int j = 0; j < tp; ++j)
      for (int64_t i = 0; i < n; ++i) ring_sum[static_cast<size_t>(i)] += value(j, rank * n + i);
    std::vector<int> asked(static_cast<size_t>(tp), 0);
    backend.fill(whole.view(), -1.0f);
    map.reduce_scatter_to_sequence_parallel_region_forward(
        [&](int64_t block, FloatView out) {
          ++asked[static_cast<size_t>(block)];
          std::vector<float> product(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) product[static_cast<size_t>(i)] = value(rank, block * n + i);
          backend.copy_from_host(product, out);
        },
        local.view(), whole.view());
    CHECK(download(local) == ring_sum);
    CHECK(asked == std::vector<int>(static_cast<size_t>(tp), 1));
    // The ring's last addition left to the caller: local keeps this rank's own product and the
    // addend holds the others' sum, which together make the same sum.
    ConstFloatView addend;
    map.reduce_scatter_to_sequence_parallel_region_forward(
        [&](int64_t block, FloatView out) {
          std::vector<float> product(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) product[static_cast<size_t>(i)] = value(rank, block * n + i);
          backend.copy_from_host(product, out);
        },
        local.view(), whole.view(), &addend);
    REQUIRE(addend.size() == n);
    const std::vector<float> own = download(local);
    std::vector<float> rest(static_cast<size_t>(n));
    backend.copy_to_host(addend, rest);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(own[static_cast<size_t>(i)] == value(rank, rank * n + i));
      CHECK(own[static_cast<size_t>(i)] + rest[static_cast<size_t>(i)] == ring_sum[static_cast<size_t>(i)]);
    }

    // All-reduce pairs: copy_to's backward and reduce_from's forward sum over the ranks.
    std::vector<float> total(static_cast<size_t>(n), 0.0f);
    for (int j = 0; j < tp; ++j)
      for (int64_t i = 0; i < n; ++i) total[static_cast<size_t>(i)] += value(j, i);
    upload(local, mine);
    map.copy_to_tensor_region_backward(local.view());
    CHECK(download(local) == total);
    upload(local, mine);
    map.reduce_from_tensor_region_forward(local.view());
    CHECK(download(local) == total);
    CHECK(map.copy_to_tensor_region_forward(local.view()).data() == local.view().data());
    CHECK(map.reduce_from_tensor_region_backward(local.view()).data() == local.view().data());
  }
}
