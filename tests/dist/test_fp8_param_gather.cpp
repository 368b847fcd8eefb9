// --fp8-param-gather's all-gather (train/fp8_param_gather.hpp): each rank casts its shard of the
// FP8 linear layers' weights and the codes are all-gathered; the result must be, byte for byte,
// the one-rank cast of each whole weight with the same scale, with the transposed copy and the
// factors the layers read, and the shards' amaxes must reduce to the whole weight's. Under
// current scaling (--fp8-recipe tensorwise) the scale itself must be the whole weight's. The
// codes gathered range by range (the buckets of --overlap-param-gather, which may cut weights)
// must be the same, and so must a rank's own cast of the whole weights after a checkpoint load.
// Run alone and under mpiexec with 1, 2 and 4 ranks (the shards then split inside the weights).
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "dist/backend_memory_mover.hpp"
#include "dist/dist_testing.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_parameters.hpp"
#include "model/linear_layer.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/fp8_param_gather.hpp"

using namespace mgt;
using mgt::dist_test::runtime;

namespace {

struct WorldGroup {
  std::unique_ptr<Backend> backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  dist::BackendMemoryMover mover{backend};
  dist::ProcessGroups groups;
  WorldGroup() {
    const dist::ParallelLayout layout(dist::ParallelFlags{}, runtime().world_size());
    groups = dist::make_process_groups(runtime(), layout, &mover);
  }
  dist::Communicator& comm() const { return *groups.data_parallel; }
};

std::vector<uint8_t> host_codes(Backend& backend, DeviceSpan<const uint8_t> device) {
  std::vector<uint8_t> host(static_cast<std::size_t>(device.size()));
  backend.copy_to_host<const uint8_t>(device, host);
  return host;
}

float host_value(Backend& backend, ConstFloatView view) {
  float v = 0.0f;
  backend.copy_to_host(view, std::span<float>(&v, 1));
  return v;
}

GptConfig small_config() {
  GptConfig config;
  config.num_layers = 2;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 17 * 3;  // tensors of odd sizes, so shards split inside them
  return config;
}

// A two-layer model's parameters and its eight FP8 linear layers.
struct Fp8Model {
  GptParameters params;
  Fp8Training fp8;
  std::vector<LinearLayer> layers;
  Fp8Model(Backend& backend, const Fp8Recipe& recipe) : params(small_config(), backend), fp8(recipe, backend, 8) {
    params.initialize(1234);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "decoder.layers." + std::to_string(l);
      for (const std::string name : {".self_attention.linear_qkv", ".self_attention.linear_proj", ".mlp.linear_fc1",
                                     ".mlp.linear_fc2"})
        layers.emplace_back(params, p + name + ".weight", p + name + ".bias", &fp8);
    }
  }
  const ParameterEntry& weight(std::int64_t k) const { return params.entry(fp8.linear_name(k) + ".weight"); }
  ConstFloatView weight_values(std::int64_t k) const {
    return static_cast<const GptParameters&>(params).param(weight(k));
  }
};

Fp8Recipe current_scaling_recipe() {
  Fp8Recipe recipe;
  recipe.current_scaling = true;
  return recipe;
}

// Linear layer k's copy against a cast of its whole weight on one rank with current scaling:
// the codes of both layouts, their factors, and the scale and amax it leaves.
void check_whole_current_cast(Fp8Model& m, std::int64_t k) {
  Backend& backend = m.params.backend();
  const Fp8Training::WeightCopy& copy = m.fp8.weight_copy(k);
  const std::int64_t n = m.weight(k).numel();
  DeviceArray<uint8_t> rows(backend, n), columns(backend, n);
  DeviceBuffer meta(backend, 4);  // factors of rows and columns, scale, amax
  backend.fill(meta.view(), 0.0f);
  backend.fp8_quantize(m.weight_values(k), copy.out, copy.in,
                       {meta.view().subspan(2, 1), meta.view().subspan(3, 1), true},
                       {rows.view(), Fp8Format::kE4M3, meta.view().subspan(0, 1)},
                       {columns.view(), Fp8Format::kE4M3, meta.view().subspan(1, 1)});
  CHECK(host_codes(backend, copy.rows) == host_codes(backend, rows.view()));
  CHECK(host_codes(backend, copy.columns.view()) == host_codes(backend, columns.view()));
  CHECK(host_value(backend, copy.scale_inv.view().subspan(0, 1)) == host_value(backend, meta.view().subspan(0, 1)));
  CHECK(host_value(backend, copy.scale_inv.view().subspan(4, 1)) == host_value(backend, meta.view().subspan(1, 1)));
  CHECK(host_value(backend, m.fp8.forward_scale().subspan(2 * k + 1, 1)) ==
        host_value(backend, meta.view().subspan(2, 1)));
  CHECK(host_value(backend, m.fp8.forward_history().subspan(2 * k + 1, 1)) ==
        host_value(backend, meta.view().subspan(3, 1)));
}

}  // namespace

TEST_CASE("fp8 param gather: the gathered codes are the one-rank cast of each whole weight",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  Fp8Recipe recipe;
  recipe.amax_history_len = 4;
  Fp8Model model(backend, recipe);
  GptParameters& params = model.params;
  Fp8Training& fp8 = model.fp8;
  // Scales of a past step, different per tensor, large enough that codes use the whole range
  // (and some saturate).
  std::vector<float> scales(static_cast<std::size_t>(fp8.forward_scale().size()));
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = 3000.0f + 500.0f * static_cast<float>(i);
  backend.copy_from_host(std::span<const float>(scales), fp8.forward_scale());

  Fp8ParamGather gather(params, fp8, world.comm(), {0, params.params().size()});
  CHECK(gather.fp8_weights() == 8);
  gather.gather_fp8_weights();
  // The amaxes of the shards, max-reduced as the next forward's reduction does.
  world.comm().all_reduce(fp8.forward_history().first(16), dist::ReduceOp::Max);

  for (std::int64_t k = 0; k < 8; ++k) {
    INFO("linear " << fp8.linear_name(k));
    const Fp8Training::WeightCopy& copy = fp8.weight_copy(k);
    const ParameterEntry& e = params.entry(fp8.linear_name(k) + ".weight");
    DeviceArray<uint8_t> rows(backend, e.numel()), columns(backend, e.numel());
    DeviceBuffer factors(backend, 3);
    backend.fill(factors.view(), 0.0f);
    backend.fp8_quantize(static_cast<const GptParameters&>(params).param(e), copy.out, copy.in,
                         {fp8.forward_scale().subspan(2 * k + 1, 1), factors.view().subspan(2, 1), false},
                         {rows.view(), Fp8Format::kE4M3, factors.view().subspan(0, 1)},
                         {columns.view(), Fp8Format::kE4M3, factors.view().subspan(1, 1)});
    CHECK(host_codes(backend, copy.rows) == host_codes(backend, rows.view()));
    CHECK(host_codes(backend, copy.columns.view()) == host_codes(backend, columns.view()));
    CHECK(host_value(backend, copy.scale_inv.view().subspan(0, 1)) == host_value(backend, factors.view().subspan(0, 1)));
    CHECK(host_value(backend, copy.scale_inv.view().subspan(4, 1)) == host_value(backend, factors.view().subspan(1, 1)));
    CHECK(host_value(backend, fp8.forward_history().subspan(2 * k + 1, 1)) ==
          host_value(backend, factors.view().subspan(2, 1)));
    CHECK(copy.pinned == (world.comm().size() > 1));  // one rank: its fp32 weights are whole
  }
  CHECK(gather.behind() == (world.comm().size() > 1));
  // The fp32 weights caught up: every rank holds the whole buffer again, and the copies follow
  // the weights once more.
  const std::vector<float> before = [&] {
    std::vector<float> host(static_cast<std::size_t>(params.params().size()));
    backend.copy_to_host(static_cast<const GptParameters&>(params).params(), std::span<float>(host));
    return host;
  }();
  gather.catch_up();
  CHECK_FALSE(gather.behind());
  for (std::int64_t k = 0; k < 8; ++k) CHECK_FALSE(fp8.weight_copy(k).pinned);
  std::vector<float> after(before.size());
  backend.copy_to_host(static_cast<const GptParameters&>(params).params(), std::span<float>(after));
  CHECK(after == before);
}

TEST_CASE("fp8 param gather under current scaling: the scale of the whole weight, its cast's codes",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  Fp8Model model(backend, current_scaling_recipe());
  // Weights of different ranges (so that the ranks' parts have different amaxes and the largest
  // lies on one rank only), one all zero (its scale 1, as a cast of zeros gives), and one so small
  // that fp8_max / amax overflows fp32 (its scale the largest float).
  for (std::int64_t k = 0; k < 8; ++k) {
    const FloatView w = model.params.param(model.weight(k));
    if (k == 5) {
      backend.fill(w, 0.0f);
      continue;
    }
    std::vector<float> host(static_cast<std::size_t>(w.size()));
    backend.copy_to_host(static_cast<ConstFloatView>(w), std::span<float>(host));
    for (std::size_t i = 0; i < host.size(); ++i)
      host[i] *= (k == 6 ? 1e-37f : 1.0f) * (1.0f + 0.37f * static_cast<float>((i * 7 + k) % 11));
    backend.copy_from_host(std::span<const float>(host), w);
  }
  Fp8ParamGather gather(model.params, model.fp8, world.comm(), {0, model.params.params().size()});
  gather.gather_fp8_weights();
  CHECK(gather.weights_in_flight() == 0);
  for (std::int64_t k = 0; k < 8; ++k) {
    INFO("linear " << model.fp8.linear_name(k));
    check_whole_current_cast(model, k);
    CHECK(model.fp8.weight_copy(k).pinned == (world.comm().size() > 1));
  }
  CHECK(host_value(backend, model.fp8.forward_scale().subspan(2 * 5 + 1, 1)) == 1.0f);
  CHECK(host_value(backend, model.fp8.forward_scale().subspan(2 * 6 + 1, 1)) == std::numeric_limits<float>::max());
}

TEST_CASE("fp8 param gather: the codes gathered range by range, cutting weights, are the whole gather's",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  Fp8Model model(backend, current_scaling_recipe());
  const std::int64_t size = model.params.params().size();
  Fp8ParamGather gather(model.params, model.fp8, world.comm(), {0, size});
  gather.cast_shard();
  CHECK(gather.weights_in_flight() == 8);
  // Ranges that begin and end inside weights and between them, started in buffer order as the
  // buckets' gathers are (every rank the same).
  std::vector<dist::PendingCollective> pending;
  std::vector<std::int64_t> cuts = {0, 37, model.weight(2).offset + 5, model.weight(4).offset, size * 2 / 3, size};
  std::sort(cuts.begin(), cuts.end());
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) gather.start_code_gathers(cuts[i], cuts[i + 1], pending);
  for (dist::PendingCollective& p : pending) p.wait();
  // Only the weights lying within the range named get their transposed copies.
  const ParameterEntry& first = model.weight(0);
  gather.codes_arrived(first.offset, first.offset + first.numel());
  CHECK(gather.weights_in_flight() == 7);
  gather.codes_arrived(0, size);
  CHECK(gather.weights_in_flight() == 0);
  for (std::int64_t k = 0; k < 8; ++k) {
    INFO("linear " << model.fp8.linear_name(k));
    check_whole_current_cast(model, k);
  }
}

TEST_CASE("fp8 param gather: after a checkpoint load each rank casts the whole weights to the gathered codes",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  for (const bool current : {false, true}) {
    INFO((current ? "current scaling" : "delayed scaling"));
    Fp8Recipe recipe = current ? current_scaling_recipe() : Fp8Recipe{};
    Fp8Model model(backend, recipe);
    backend.fill(model.fp8.forward_scale(), 300.0f);
    Fp8ParamGather gather(model.params, model.fp8, world.comm(), {0, model.params.params().size()});
    gather.gather_fp8_weights();
    world.comm().all_reduce(model.fp8.forward_history().first(16), dist::ReduceOp::Max);
    std::vector<std::vector<uint8_t>> rows, columns;
    std::vector<float> factors, amaxes;
    for (std::int64_t k = 0; k < 8; ++k) {
      const Fp8Training::WeightCopy& copy = model.fp8.weight_copy(k);
      rows.push_back(host_codes(backend, copy.rows));
      columns.push_back(host_codes(backend, copy.columns.view()));
      factors.push_back(host_value(backend, copy.scale_inv.view().subspan(0, 1)));
      amaxes.push_back(host_value(backend, model.fp8.forward_history().subspan(2 * k + 1, 1)));
    }
    gather.catch_up();
    backend.fill(model.fp8.forward_history(), 0.0f);
    gather.cast_whole_weights();
    CHECK_FALSE(gather.behind());
    for (std::int64_t k = 0; k < 8; ++k) {
      INFO("linear " << model.fp8.linear_name(k));
      const Fp8Training::WeightCopy& copy = model.fp8.weight_copy(k);
      CHECK(host_codes(backend, copy.rows) == rows[static_cast<std::size_t>(k)]);
      CHECK(host_codes(backend, copy.columns.view()) == columns[static_cast<std::size_t>(k)]);
      CHECK(host_value(backend, copy.scale_inv.view().subspan(0, 1)) == factors[static_cast<std::size_t>(k)]);
      CHECK(host_value(backend, copy.scale_inv.view().subspan(4, 1)) == factors[static_cast<std::size_t>(k)]);
      CHECK(host_value(backend, model.fp8.forward_history().subspan(2 * k + 1, 1)) ==
            amaxes[static_cast<std::size_t>(k)]);
      CHECK((copy.made && copy.recorded && !copy.pinned));
      CHECK(copy.version == model.params.params_version());
    }
  }
}

// The routed experts' region under expert parallelism lies at the end of the buffer and is
// gathered over its own group (lib/train/training_setup.cpp): a gather of a region that starts
// inside the buffer shards that region alone, casts only the FP8 weights within it and leaves
// the others' copies to their layers, under delayed and current scaling.
TEST_CASE("fp8 param gather: a region that starts inside the buffer, as the experts' does",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  for (const bool current : {false, true}) {
    INFO((current ? "current scaling" : "delayed scaling"));
    Fp8Recipe recipe = current ? current_scaling_recipe() : Fp8Recipe{};
    recipe.amax_history_len = 4;
    Fp8Model model(backend, recipe);
    backend.fill(model.fp8.forward_scale(), 300.0f);
    const std::int64_t size = model.params.params().size();
    const std::int64_t begin = model.weight(4).offset - 3;  // cuts the tensor before layer 1's first weight
    Fp8ParamGather gather(model.params, model.fp8, world.comm(), {begin, size});
    CHECK(gather.fp8_weights() == 4);
    CHECK(gather.region().begin == begin);
    CHECK(gather.fp8_elements() + gather.other_elements() == size - begin);
    gather.gather_fp8_weights();
    if (!current) world.comm().all_reduce(model.fp8.forward_history().first(16), dist::ReduceOp::Max);
    for (std::int64_t k = 0; k < 8; ++k) {
      INFO("linear " << model.fp8.linear_name(k));
      const Fp8Training::WeightCopy& copy = model.fp8.weight_copy(k);
      if (k < 4) {
        // Outside the region: the layer's own copy, not made by the gather.
        CHECK(copy.rows.data() == copy.own_rows.view().data());
        CHECK_FALSE(copy.made);
        continue;
      }
      CHECK(copy.pinned == (world.comm().size() > 1));
      if (current) {
        check_whole_current_cast(model, k);
        continue;
      }
      const ParameterEntry& e = model.weight(k);
      DeviceArray<uint8_t> rows(backend, e.numel()), columns(backend, e.numel());
      DeviceBuffer factors(backend, 3);
      backend.fill(factors.view(), 0.0f);
      backend.fp8_quantize(model.weight_values(k), copy.out, copy.in,
                           {model.fp8.forward_scale().subspan(2 * k + 1, 1), factors.view().subspan(2, 1), false},
                           {rows.view(), Fp8Format::kE4M3, factors.view().subspan(0, 1)},
                           {columns.view(), Fp8Format::kE4M3, factors.view().subspan(1, 1)});
      CHECK(host_codes(backend, copy.rows) == host_codes(backend, rows.view()));
      CHECK(host_codes(backend, copy.columns.view()) == host_codes(backend, columns.view()));
      CHECK(host_value(backend, model.fp8.forward_history().subspan(2 * k + 1, 1)) ==
            host_value(backend, factors.view().subspan(2, 1)));
    }
    gather.catch_up();
    CHECK_FALSE(gather.behind());
  }
}

namespace {

// A model of two layers, the second an MoE layer whose routed experts form a region of their own
// (ExpertParallelRank of size 2: every rank here holds experts 0 and 1, so that the ranks form
// their expert-data-parallel group), every linear layer in FP8.
struct Fp8MoeModel {
  static GptConfig config() {
    GptConfig c = small_config();
    c.add_bias_linear = false;  // experts have no biases
    c.moe.num_experts = 4;
    c.moe.layer_pattern = {false, true};
    c.moe.ffn_hidden_size = 12;
    c.moe.topk = 2;
    return c;
  }
  static std::int64_t linears(const GptParameters& params, bool experts) {
    std::int64_t n = 0;
    for (const ParameterEntry& e : params.entries()) n += is_linear_weight(e) && e.expert_parallel == experts ? 1 : 0;
    return n;
  }
  static bool is_linear_weight(const ParameterEntry& e) {
    for (const char* name : {".linear_qkv.weight", ".linear_proj.weight", ".linear_fc1.weight", ".linear_fc2.weight"})
      if (e.name.ends_with(name)) return true;
    return false;
  }
  GptParameters params;
  Fp8Training fp8;
  std::vector<LinearLayer> layers;
  Fp8MoeModel(Backend& backend, const Fp8Recipe& recipe)
      : params(config(), backend, {}, {}, ExpertParallelRank{2, 0}),
        fp8(recipe, backend, linears(params, false), linears(params, true)) {
    params.initialize(1234);
    layers.reserve(static_cast<std::size_t>(fp8.linears()));
    for (const ParameterEntry& e : params.entries())
      if (is_linear_weight(e))
        layers.emplace_back(params, e.name, e.name.substr(0, e.name.rfind('.')) + ".bias", &fp8, e.expert_parallel);
    fp8.require_complete();
    backend.fill(fp8.forward_scale(), 300.0f);
  }
};

}  // namespace

TEST_CASE("fp8 param gather: the distributed optimizer gathers the dense and the experts' region each by its own",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  dist::Communicator& comm = world.comm();
  // The experts' norm group: one rank (the experts are whole on each).
  const ExpertGradientGroups experts{&comm, world.groups.tensor_model_parallel.get()};
  REQUIRE(experts.expert_tensor_model_pipeline->size() == 1);
  for (const bool current : {false, true}) {
    INFO((current ? "current scaling" : "delayed scaling"));
    const Fp8Recipe recipe = current ? current_scaling_recipe() : Fp8Recipe{};
    Fp8MoeModel reference(backend, recipe), gathered(backend, recipe);
    const std::int64_t expert_begin = gathered.params.table().expert_begin;
    const std::int64_t size = gathered.params.params().size();
    REQUIRE(expert_begin < size);
    AdamWOptimizer plain_optimizer(reference.params, AdamWSettings{}, comm, true, nullptr, experts);
    AdamWOptimizer optimizer(gathered.params, AdamWSettings{}, comm, true, nullptr, experts);
    Fp8ParamGather dense_gather(gathered.params, gathered.fp8, comm, {0, expert_begin});
    Fp8ParamGather expert_gather(gathered.params, gathered.fp8, comm, {expert_begin, size});
    CHECK(expert_gather.fp8_weights() == 4);  // experts 0 and 1, fc1 and fc2
    CHECK(dense_gather.fp8_weights() == gathered.fp8.linears() - 4);
    optimizer.add_fp8_param_gather(dense_gather);
    optimizer.add_fp8_param_gather(expert_gather);
    {
      // A gather of another range (of another model: a gather binds the layers' copies).
      Fp8MoeModel other(backend, recipe);
      Fp8ParamGather stray(other.params, other.fp8, comm, {1, size});
      CHECK_THROWS_WITH(optimizer.add_fp8_param_gather(stray), Catch::Contains("matches no region"));
    }

    // The same gradients on every rank (as reduced), the same step on both.
    std::vector<float> grads(static_cast<std::size_t>(size));
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>((i * 13) % 17) - 0.08f;
    backend.copy_from_host(std::span<const float>(grads), reference.params.grads());
    backend.copy_from_host(std::span<const float>(grads), gathered.params.grads());
    CHECK(plain_optimizer.step(1e-2, 0.1).applied);
    CHECK(optimizer.step(1e-2, 0.1).applied);
    CHECK(dense_gather.behind() == (comm.size() > 1));
    CHECK(expert_gather.behind() == (comm.size() > 1));
    CHECK(dense_gather.weights_in_flight() + expert_gather.weights_in_flight() == 0);
    // Both regions' fp32 weights gathered before either's copies are unpinned: every copy is then
    // current (its layer casts nothing again). One rank gathers nothing: its layers cast below.
    Fp8ParamGather::catch_up({&dense_gather, &expert_gather});
    for (std::int64_t k = 0; comm.size() > 1 && k < gathered.fp8.linears(); ++k) {
      const Fp8Training::WeightCopy& copy = gathered.fp8.weight_copy(k);
      CHECK((copy.made && !copy.pinned && copy.version == gathered.params.params_version()));
    }

    // The fp32 weights as the plain step's gather leaves them, and every layer's codes (dense and
    // experts') those of its own cast of the whole weight.
    const auto host_params = [&](const GptParameters& p) {
      std::vector<float> host(static_cast<std::size_t>(size));
      backend.copy_to_host(p.params(), std::span<float>(host));
      return host;
    };
    CHECK(host_params(gathered.params) == host_params(reference.params));
    for (std::int64_t k = 0; k < gathered.fp8.linears(); ++k) {
      INFO("linear " << gathered.fp8.linear_name(k));
      reference.layers[static_cast<std::size_t>(k)].cast_fp8_weight();
      gathered.layers[static_cast<std::size_t>(k)].cast_fp8_weight();  // nothing to do: caught up
      const Fp8Training::WeightCopy& a = reference.fp8.weight_copy(k);
      const Fp8Training::WeightCopy& b = gathered.fp8.weight_copy(k);
      CHECK(host_codes(backend, b.rows) == host_codes(backend, a.rows));
      CHECK(host_codes(backend, b.columns.view()) == host_codes(backend, a.columns.view()));
      CHECK(host_value(backend, b.scale_inv.view().subspan(0, 1)) == host_value(backend, a.scale_inv.view().subspan(0, 1)));
    }
  }
}
