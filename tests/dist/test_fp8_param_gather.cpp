// --fp8-param-gather's all-gather (train/fp8_param_gather.hpp): each rank casts its shard of the
// FP8 linear layers' weights and the codes are all-gathered; the result must be, byte for byte,
// the one-rank cast of each whole weight with the same scale, with the transposed copy and the
// factors the layers read, and the shards' amaxes must reduce to the whole weight's. Run alone
// and under mpiexec with 1, 2 and 4 ranks (the shards then split inside the weights).
#include <catch2/catch.hpp>

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

}  // namespace

TEST_CASE("fp8 param gather: the gathered codes are the one-rank cast of each whole weight",
          "[dist][data-parallel][fp8]") {
  WorldGroup world;
  Backend& backend = world.backend;
  GptConfig config;
  config.num_layers = 2;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 17 * 3;  // tensors of odd sizes, so shards split inside them
  GptParameters params(config, backend);
  params.initialize(1234);
  Fp8Recipe recipe;
  recipe.amax_history_len = 4;
  Fp8Training fp8(recipe, backend, 8);
  std::vector<LinearLayer> layers;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l);
    for (const std::string name : {".self_attention.linear_qkv", ".self_attention.linear_proj", ".mlp.linear_fc1",
                                   ".mlp.linear_fc2"})
      layers.emplace_back(params, p + name + ".weight", p + name + ".bias", &fp8);
  }
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
