// FLOPs of one training iteration of a GPT, as Megatron counts them for --log-throughput
// (training.py num_floating_point_operations, core_v0.13.0):
//   B·s·[ 12·h·G·(L_dense·f + L_moe·(f_moe·topk + f_shared)) + 12·L·h²·(1 + g/n + s/(2h))·(k·n/h) + 6·h·V ]
// with G = 3/2 for SwiGLU (else 1): 3 passes (forward, two backward GEMMs) × 2 FLOPs per
// multiply-add, causal attention counted at half. An MoE layer counts the experts a token is
// routed to and the shared expert (the router's GEMM is not counted, as in Megatron).
#pragma once
#include <cstdint>

namespace mgt {

struct GptFlopsShape {
  std::int64_t global_batch_size = 0;  // B
  std::int64_t seq_length = 0;         // s
  std::int64_t num_layers = 0;         // L
  std::int64_t hidden_size = 0;        // h
  std::int64_t ffn_hidden_size = 0;    // f
  std::int64_t num_attention_heads = 0;  // n
  std::int64_t num_query_groups = 0;   // g (= n without grouped-query attention)
  std::int64_t kv_channels = 0;        // k
  std::int64_t padded_vocab_size = 0;  // V
  bool swiglu = false;
  // Mixture of Experts: the layers whose MLP is one (L_moe of L), each expert's hidden size,
  // the experts each token is routed to, and the shared experts' hidden size (0: none).
  std::int64_t num_moe_layers = 0;
  std::int64_t moe_ffn_hidden_size = 0;
  std::int64_t moe_router_topk = 0;
  std::int64_t moe_shared_expert_size = 0;
};

double gpt_flops_per_iteration(const GptFlopsShape& shape);

}  // namespace mgt
