#include "ckpt/expert_bias_records.hpp"

#include <span>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"

namespace mgt::ckpt {

std::string expert_bias_path(std::int64_t layer) { return "buffers/" + MoeExpertBias::name(layer); }

void emit_expert_bias(ShardFileSink& out, const MoeExpertBias& bias) {
  for (const std::int64_t layer : bias.layers()) {
    std::vector<float> values = bias.read(layer);
    const auto experts = static_cast<std::int64_t>(values.size());
    out.tensor({TensorRecord::whole(expert_bias_path(layer), TensorDType::Float32, {experts}),
                HostBytes(std::move(values))});
  }
}

void load_expert_bias(const ShardedCheckpoint& reader, MoeExpertBias& bias, const std::string& where) {
  std::int64_t missing = 0;
  for (const std::int64_t layer : bias.layers()) {
    const std::string path = expert_bias_path(layer);
    if (!reader.contains(path)) {
      ++missing;
      continue;
    }
    std::vector<float> values = bias.read(layer);
    const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(values.size())};
    if (reader.global_shape(path) != shape)
      throw Error(where + ": tensor '" + path + "' does not hold " + std::to_string(shape[0]) + " experts' biases");
    reader.read_whole(path, TensorDType::Float32, shape, std::as_writable_bytes(std::span<float>(values)));
    bias.write(layer, values);
  }
  if (missing > 0)
    log::info(where + " holds no expert bias for " + std::to_string(missing) + " MoE layers: their biases start at 0");
}

}  // namespace mgt::ckpt
