#include "train/fp8_options.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

namespace mgt {

// clang-format off
std::vector<FlagDefinition> fp8_flags(Fp8Options& f) {
  return {
    store("fp8-format", "F", f.format, "Train the transformer layers' linear layers in FP8: e4m3 (E4M3 everywhere) or hybrid (E4M3 forward, E5M2 gradients); needs --bf16 or --fp16")
        .choices({"e4m3", "hybrid"}),
    store("fp8-recipe", "R", f.recipe, "FP8 scaling: delayed (amax history) or tensorwise (each tensor's own amax)")
        .choices({"delayed", "tensorwise"})
        .refused_because("mxfp8", "MXFP8 block scaling runs on Blackwell GPUs (compute capability 10.0), which mgt "
                                  "does not target; use delayed or tensorwise on Hopper")
        .refused_because("blockwise", "FP8 block scaling (1x128 and 128x128 blocks, Transformer Engine's "
                                      "Float8BlockScaling) is not implemented; use delayed or tensorwise"),
    store("fp8-margin", "N", f.margin, "Scale FP8 values N powers of two below the format's largest"),
    store("fp8-interval", "N", f.interval, "Deprecated in Megatron and ignored: scales are updated every micro-batch"),
    store("fp8-amax-history-len", "N", f.amax_history_len, "Amaxes kept per tensor for delayed scaling"),
    store("fp8-amax-compute-algo", "A", f.amax_compute_algo, "most_recent or max of the amax history").choices({"most_recent", "max"}),
    store_false("no-fp8-wgrad", f.wgrad, "Weight gradients in bf16/fp16 instead of FP8").key("fp8_wgrad"),
    store_true("fp8-param-gather", f.param_gather, "Keep the FP8 linear layers' weights in FP8: the distributed optimizer casts its shard of them and all-gathers FP8 codes, 1 byte per element (needs --use-distributed-optimizer)"),
    store_false("no-fp8-norm-casts", f.norm_casts, "The input norm and a dense layer's pre-MLP norm write bf16 outputs for the next linear layer to cast; without it they write that layer's FP8 input themselves under delayed scaling (Transformer Engine's LayerNormLinear), keeping 2 bytes per element less activation memory each").key("fp8_norm_casts"),
    store_true("first-last-layers-bf16", f.first_last_layers_bf16, "Keep the first and last transformer layers out of FP8"),
    store("num-layers-at-start-in-bf16", "N", f.num_layers_at_start_in_bf16, "Layers at the start kept out of FP8 with --first-last-layers-bf16"),
    store("num-layers-at-end-in-bf16", "N", f.num_layers_at_end_in_bf16, "Layers at the end kept out of FP8 with --first-last-layers-bf16"),
  };
}
// clang-format on

void validate_fp8_options(const Fp8Options& f, Precision precision, bool distributed_optimizer,
                          std::int64_t num_layers) {
  if (!f.format) {
    if (f.first_last_layers_bf16 || f.param_gather)
      log::info(std::string(f.param_gather ? "--fp8-param-gather" : "--first-last-layers-bf16") +
                " has no effect without --fp8-format");
    return;
  }
  if (precision == Precision::Fp32)
    throw UsageError("--fp8-format needs --bf16 or --fp16: FP8 GEMMs take their inputs from 16-bit activations");
  if (f.param_gather && !distributed_optimizer)
    throw UsageError("--fp8-param-gather needs --use-distributed-optimizer");
  if (f.interval != 1) log::info("--fp8-interval is deprecated and ignored (as in Megatron): scales update every micro-batch");
  if (f.first_last_layers_bf16) {
    if (f.num_layers_at_start_in_bf16 < 0 || f.num_layers_at_end_in_bf16 < 0)
      throw UsageError("--num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16 must be >= 0");
    if (f.num_layers_at_start_in_bf16 + f.num_layers_at_end_in_bf16 > num_layers)
      throw UsageError("--num-layers-at-start-in-bf16 (" + std::to_string(f.num_layers_at_start_in_bf16) +
                       ") + --num-layers-at-end-in-bf16 (" + std::to_string(f.num_layers_at_end_in_bf16) +
                       ") exceed --num-layers (" + std::to_string(num_layers) + ")");
  }
  if (f.recipe == "tensorwise" && (f.amax_history_len != 1 || f.amax_compute_algo != "most_recent" || f.margin != 0))
    log::info("--fp8-recipe tensorwise scales each tensor by its own amax: --fp8-amax-history-len, "
              "--fp8-amax-compute-algo and --fp8-margin have no effect");
}

std::optional<Fp8Recipe> fp8_recipe(const Fp8Options& f) {
  if (!f.format) return std::nullopt;
  Fp8Recipe r;
  r.forward_format = Fp8Format::kE4M3;
  r.backward_format = *f.format == "hybrid" ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
  r.current_scaling = f.recipe == "tensorwise";
  r.margin = static_cast<int>(f.margin);
  r.amax_history_len = f.amax_history_len;
  r.amax_compute_algo = f.amax_compute_algo == "max" ? Fp8AmaxAlgo::kMax : Fp8AmaxAlgo::kMostRecent;
  r.wgrad = f.wgrad;
  r.norm_casts = f.norm_casts;
  if (f.first_last_layers_bf16) {
    r.bf16_layers_at_start = f.num_layers_at_start_in_bf16;
    r.bf16_layers_at_end = f.num_layers_at_end_in_bf16;
  }
  return r;
}

}  // namespace mgt
