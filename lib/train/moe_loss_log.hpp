// The MoE layers' auxiliary losses as Megatron logs them (megatron/core/transformer/moe/
// moe_utils.py track_moe_metrics): each tracker name (load_balancing_loss, z_loss) with each
// layer's value summed over the iteration's micro-batches times 1 / micro-batches, and its sum
// over the layers divided by the number of MoE layers in the log line, metrics.jsonl and
// TensorBoard; per layer (moe/{name}_layer_{i}) with --moe-per-layer-logging. The values are the
// losses divided by their coefficients. mgt averages over every data-parallel rank's
// micro-batches, so the value does not depend on the layout (under context parallelism the
// statistics arrive reduced over the group: train/training_step.cpp).
#pragma once
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/moe_config.hpp"

namespace mgt {

struct MoeLossValues {
  std::vector<std::pair<std::string, double>> totals;                  // name -> over the MoE layers
  std::vector<std::pair<std::string, std::vector<double>>> per_layer;  // name -> one per layer
};

// `statistics`: [2 · num_layers] sums (model/gpt_model.hpp moe_statistics) over `micro_batches`
// micro-batches. Empty for a dense model, or where the losses are not computed.
MoeLossValues moe_loss_values(const MoeConfig& moe, std::span<const double> statistics, double micro_batches);

}  // namespace mgt
