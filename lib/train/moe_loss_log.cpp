#include "train/moe_loss_log.hpp"

namespace mgt {

MoeLossValues moe_loss_values(const MoeConfig& moe, std::span<const double> statistics, double micro_batches) {
  MoeLossValues v;
  if (!moe.enabled() || statistics.empty() || !(micro_batches > 0.0)) return v;
  const std::size_t layers = statistics.size() / 2;
  const double moe_layers = static_cast<double>(moe.num_moe_layers());
  auto add = [&](const char* name, std::size_t which) {
    std::vector<double> per_layer(layers);
    double sum = 0.0;
    for (std::size_t l = 0; l < layers; ++l) {
      per_layer[l] = statistics[2 * l + which] / micro_batches;
      sum += per_layer[l];
    }
    v.totals.emplace_back(name, sum / moe_layers);
    v.per_layer.emplace_back(name, std::move(per_layer));
  };
  // Megatron records the load-balancing loss only where its coefficient is not 0.
  if (moe.aux_loss_coeff != 0.0 && moe.load_balancing != MoeLoadBalancing::kNone) add("load_balancing_loss", 0);
  if (moe.z_loss) add("z_loss", 1);
  return v;
}

}  // namespace mgt
