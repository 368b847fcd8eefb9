// --fp8-param-gather's casts on the CUDA backend (train/fp8_param_gather.hpp), on one rank: under
// current scaling (--fp8-recipe tensorwise) the amax taken of the shard, the scale derived from
// it and the cast with that scale must give, to the bit, the codes, factors, scale and amax of the
// layer's own current-scaling cast of the whole weight on the GPU, and the CPU backend's results
// for the same weights — an all-zero weight (scale 1) and a weight so small that fp8_max / amax
// overflows fp32 (the largest float as its scale) included. After a checkpoint load the cast of
// the whole weights must give the same codes. (tests/dist/test_fp8_param_gather.cpp checks the
// shards and their gathers across ranks on the CPU.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend_pair.hpp"
#include "dist/local_communicator.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_parameters.hpp"
#include "model/linear_layer.hpp"
#include "train/fp8_param_gather.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;

namespace {

GptConfig small_config() {
  GptConfig config;
  config.num_layers = 2;
  config.hidden_size = 64;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 96;
  return config;
}

// A two-layer model's parameters on `backend` and its eight FP8 linear layers under current
// scaling; weight 5 all zero, weight 6 scaled down to amaxes near 1e-39.
struct Fp8Model {
  GptParameters params;
  Fp8Training fp8;
  std::vector<LinearLayer> layers;
  explicit Fp8Model(Backend& backend) : params(small_config(), backend), fp8(recipe(), backend, 8) {
    params.initialize(1234);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "decoder.layers." + std::to_string(l);
      for (const std::string name : {".self_attention.linear_qkv", ".self_attention.linear_proj", ".mlp.linear_fc1",
                                     ".mlp.linear_fc2"})
        layers.emplace_back(params, p + name + ".weight", p + name + ".bias", &fp8);
    }
    backend.fill(params.param(weight(5)), 0.0f);
    const FloatView tiny = params.param(weight(6));
    std::vector<float> host(static_cast<std::size_t>(tiny.size()));
    backend.copy_to_host(static_cast<ConstFloatView>(tiny), std::span<float>(host));
    for (float& x : host) x *= 1e-37f;
    backend.copy_from_host(std::span<const float>(host), tiny);
  }
  static Fp8Recipe recipe() {
    Fp8Recipe r;
    r.current_scaling = true;
    return r;
  }
  const ParameterEntry& weight(std::int64_t k) const { return params.entry(fp8.linear_name(k) + ".weight"); }
};

// What a test compares of linear layer k: both layouts' codes, then their factors, the scale and
// the amax as raw float bits.
struct CastResult {
  std::vector<uint8_t> rows, columns;
  std::vector<float> meta;
  bool operator==(const CastResult&) const = default;
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

CastResult copy_of(Fp8Model& m, std::int64_t k) {
  Backend& backend = m.params.backend();
  const Fp8Training::WeightCopy& copy = m.fp8.weight_copy(k);
  return {host_codes(backend, copy.rows),
          host_codes(backend, copy.columns.view()),
          {host_value(backend, copy.scale_inv.view().subspan(0, 1)),
           host_value(backend, copy.scale_inv.view().subspan(4, 1)),
           host_value(backend, m.fp8.forward_scale().subspan(2 * k + 1, 1)),
           host_value(backend, m.fp8.forward_history().subspan(2 * k + 1, 1))}};
}

// The layer's own cast of the whole weight with current scaling.
CastResult whole_cast(Fp8Model& m, std::int64_t k) {
  Backend& backend = m.params.backend();
  const Fp8Training::WeightCopy& copy = m.fp8.weight_copy(k);
  const std::int64_t n = m.weight(k).numel();
  DeviceArray<uint8_t> rows(backend, n), columns(backend, n);
  DeviceBuffer meta(backend, 4);
  backend.fill(meta.view(), 0.0f);
  backend.fp8_quantize(static_cast<const GptParameters&>(m.params).param(m.weight(k)), copy.out, copy.in,
                       {meta.view().subspan(2, 1), meta.view().subspan(3, 1), true},
                       {rows.view(), Fp8Format::kE4M3, meta.view().subspan(0, 1)},
                       {columns.view(), Fp8Format::kE4M3, meta.view().subspan(1, 1)});
  std::vector<float> host(4);
  backend.copy_to_host(static_cast<ConstFloatView>(meta.view()), std::span<float>(host));
  return {host_codes(backend, rows.view()), host_codes(backend, columns.view()), host};
}

}  // namespace

TEST_CASE("cuda fp8 param gather: the tensorwise shard cast equals the whole weight's cast and the CPU's",
          "[cuda][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair backends;
  Fp8Model gpu(*backends.gpu), cpu(*backends.cpu);
  dist::LocalCommunicator gpu_group("data-parallel", 0, nullptr, nullptr);
  dist::LocalCommunicator cpu_group("data-parallel", 0, nullptr, nullptr);
  Fp8ParamGather gpu_gather(gpu.params, gpu.fp8, gpu_group, {0, std::as_const(gpu.params).params().size()});
  Fp8ParamGather cpu_gather(cpu.params, cpu.fp8, cpu_group, {0, std::as_const(cpu.params).params().size()});
  gpu_gather.gather_fp8_weights();
  cpu_gather.gather_fp8_weights();
  for (std::int64_t k = 0; k < 8; ++k) {
    INFO("linear " << gpu.fp8.linear_name(k));
    const CastResult gathered = copy_of(gpu, k);
    CHECK(gathered == whole_cast(gpu, k));
    CHECK(gathered == copy_of(cpu, k));
  }
  CHECK(copy_of(gpu, 5).meta[2] == 1.0f);
  CHECK(copy_of(gpu, 6).meta[2] == std::numeric_limits<float>::max());
  std::vector<CastResult> before;
  for (std::int64_t k = 0; k < 8; ++k) before.push_back(copy_of(gpu, k));
  gpu_gather.cast_whole_weights();
  for (std::int64_t k = 0; k < 8; ++k) CHECK(copy_of(gpu, k) == before[static_cast<std::size_t>(k)]);
}
