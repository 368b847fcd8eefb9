#include "model/norm_fp8_cast.hpp"

#include "model/recompute_plan.hpp"

namespace mgt {

NormFp8Casts layer_norm_fp8_casts(const GptConfig& config, bool moe_layer) {
  const std::optional<Fp8Recipe>& fp8 = config.fp8;
  // The recomputation of a training pass decides: an evaluation pass runs the same layers.
  const bool applies = fp8 && fp8->norm_casts && !fp8->current_scaling && fp8->wgrad &&
                       config.recompute_granularity != RecomputeGranularity::kFull &&
                       !recomputes_layernorm(config, true);
  return {applies, applies && !moe_layer && !recomputes_mlp(config, true)};
}

NormFp8Casts model_norm_fp8_casts(const GptConfig& config, bool sequence_parallel) {
  const bool every_layer_fp8 =
      config.fp8 && config.fp8->bf16_layers_at_start == 0 && config.fp8->bf16_layers_at_end == 0;
  if (!every_layer_fp8 || sequence_parallel || config.num_layers == 0) return {};
  return layer_norm_fp8_casts(config, config.moe.num_moe_layers() > 0);
}

}  // namespace mgt
