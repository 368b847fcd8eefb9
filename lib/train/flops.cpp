#include "train/flops.hpp"

namespace mgt {

double gpt_flops_per_iteration(const GptFlopsShape& m) {
  // In double from the start, as Python's mixed int/float arithmetic ends up; the products
  // overflow 64-bit integers for large models anyway.
  const double B = static_cast<double>(m.global_batch_size);
  const double s = static_cast<double>(m.seq_length);
  const double L = static_cast<double>(m.num_layers);
  const double h = static_cast<double>(m.hidden_size);
  const double f = static_cast<double>(m.ffn_hidden_size);
  const double n = static_cast<double>(m.num_attention_heads);
  const double g = static_cast<double>(m.num_query_groups);
  const double k = static_cast<double>(m.kv_channels);
  const double V = static_cast<double>(m.padded_vocab_size);
  const double gated = m.swiglu ? 1.5 : 1.0;
  const double moe_layers = static_cast<double>(m.num_moe_layers);
  const double routed = static_cast<double>(m.moe_ffn_hidden_size * m.moe_router_topk + m.moe_shared_expert_size);
  const double mlp = 12.0 * h * gated * ((L - moe_layers) * f + moe_layers * routed);
  const double attention = 12.0 * L * h * h * ((1.0 + g / n + s / (2.0 * h)) * (k * n / h));
  const double logits = 6.0 * h * V;
  return B * s * (mlp + attention + logits);
}

}  // namespace mgt
