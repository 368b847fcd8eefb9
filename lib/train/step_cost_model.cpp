#include "train/step_cost_model.hpp"

#include <algorithm>

#include "model/memory_estimate.hpp"

namespace mgt {

namespace {

constexpr double kBf16 = 2;  // bytes per activation element

// Seconds per micro-batch of one pipeline stage, by part.
struct StageTime {
  double gemm = 0, attention = 0, memory_bound = 0, tensor_parallel = 0, context_parallel = 0, expert_parallel = 0,
         pipeline_send = 0;
  double total() const {
    return gemm + attention + memory_bound + tensor_parallel + context_parallel + expert_parallel + pipeline_send;
  }
  StageTime& operator+=(const StageTime& o) {
    gemm += o.gemm, attention += o.attention, memory_bound += o.memory_bound;
    tensor_parallel += o.tensor_parallel, context_parallel += o.context_parallel;
    expert_parallel += o.expert_parallel, pipeline_send += o.pipeline_send;
    return *this;
  }
  StageTime scaled(double f) const {
    StageTime s = *this;
    s.gemm *= f, s.attention *= f, s.memory_bound *= f, s.tensor_parallel *= f, s.context_parallel *= f,
        s.expert_parallel *= f, s.pipeline_send *= f;
    return s;
  }
};

// A mixture-of-experts layer from the dense `layer` of the same shape: its MLP replaced by the
// router, the routed experts (each token's top-k, their GEMMs at a share of the dense ones' rate
// that grows with the rows each expert receives), the shared expert, the tokens' permutation and weighted
// combination, and with expert parallelism the four all-to-alls (dispatch and combine, forward
// and backward), none hidden. The experts' tensor-parallel size is TP's.
StageTime moe_layer_time(const StageTime& layer, const GptConfig& c, double t, double tp, double layer_gemm_rate,
                         double memory_rate, const GpuCostConstants& gpu) {
  const MoeConfig& m = c.moe;
  const double h = static_cast<double>(c.hidden_size);
  const double gated = c.gated_linear_unit() ? 2.0 : 1.0;
  const double activation_per_width = c.gated_linear_unit() ? 3.0 : 2.0;  // elements per hidden unit
  const double f = static_cast<double>(c.ffn_hidden_size);
  const double fe = static_cast<double>(m.ffn_hidden_size);
  const double fs = static_cast<double>(m.shared_expert_intermediate_size);
  const double k = static_cast<double>(m.topk);
  const double ep = static_cast<double>(m.expert_model_parallel_size);
  StageTime moe = layer;
  const double dense_mlp = 2 * t * (h * gated * f + f * h) / tp;
  const double routed = 2 * t * k * (h * gated * fe + fe * h) / tp;
  const double shared = 2 * t * (h * gated * fs + fs * h) / tp;
  const double router = 2 * t * h * static_cast<double>(m.num_experts);
  // Each expert's GEMMs have t·k·EP/E rows here on average: the fewer, the further from the
  // dense GEMMs' rate (the weight gradients' fp32 main-gradient traffic paid for fewer rows).
  const double rows = t * k * ep / static_cast<double>(m.num_experts);
  const double share = rows / (rows + gpu.grouped_gemm_half_rate_rows);
  moe.gemm += 3 * (routed / share + shared + router - dense_mlp) / layer_gemm_rate;
  // The activation over k rows per token instead of one; each routed row gathered (read and
  // written) and read again by the weighted sum, which writes the token's row.
  const double elements = activation_per_width * (k * fe + fs - f) / tp + (3 * k + 1) * h;
  moe.memory_bound += 3 * kBf16 * t * elements / memory_rate;
  if (ep > 1) moe.expert_parallel = 4 * t * k * h * kBf16 * (ep - 1) / ep / gpu.expert_parallel_bytes_per_s;
  return moe;
}

}  // namespace

StepCostShape step_cost_shape(const TrainOptions& o, const GptConfig& config) {
  StepCostShape s;
  s.config = config.resolved();
  s.global_batch_size = o.optim.global_batch_size.value_or(0);
  s.micro_batch_size = o.optim.micro_batch_size.value_or(0);
  s.tensor_parallel = o.parallel.tensor_model_parallel_size;
  s.pipeline_parallel = o.parallel.pipeline_model_parallel_size;
  s.virtual_pipeline = o.parallel.virtual_pipeline_model_parallel_size;
  s.context_parallel = o.parallel.context_parallel_size;
  s.data_parallel = o.parallel.data_parallel_size;
  s.sequence_parallel = o.parallel.sequence_parallel && s.tensor_parallel > 1;
  s.distributed_optimizer = o.parallel.use_distributed_optimizer;
  s.overlap_grad_reduce = o.parallel.overlap_grad_reduce;
  ParallelLayout layout;
  layout.tensor_parallel = s.tensor_parallel;
  layout.pipeline_parallel = s.pipeline_parallel;
  layout.data_parallel = s.data_parallel;
  layout.context_parallel = s.context_parallel;
  s.parameters_per_rank = parameters_per_rank(s.config, layout);
  s.expert_parameters_per_rank = routed_expert_parameters_per_rank(s.config, layout);
  s.expert_parallel = std::max<std::int64_t>(1, s.config.moe.expert_model_parallel_size);
  return s;
}

StepEstimate estimate_step(const StepCostShape& shape, const GpuCostConstants& gpu) {
  const GptConfig& c = shape.config;
  const double tp = static_cast<double>(shape.tensor_parallel);
  const double pp = static_cast<double>(shape.pipeline_parallel);
  const double vp = static_cast<double>(shape.virtual_pipeline);
  const double cp = static_cast<double>(shape.context_parallel);
  const double dp = static_cast<double>(shape.data_parallel);
  const double h = static_cast<double>(c.hidden_size);
  const double f = static_cast<double>(c.ffn_hidden_size);
  const double heads_width = static_cast<double>(c.num_attention_heads * c.kv_channels);
  const double groups_width = static_cast<double>(c.query_groups() * c.kv_channels);
  const double qkv = static_cast<double>(c.qkv_size());
  const double fc1 = static_cast<double>(c.fc1_size());
  const double vocab = static_cast<double>(c.padded_vocab_size);
  const double s = static_cast<double>(c.seq_length);
  const double t = static_cast<double>(shape.micro_batch_size) * s / cp;  // tokens per rank and micro-batch
  const double microbatches = static_cast<double>(shape.global_batch_size) /
                              (static_cast<double>(shape.micro_batch_size) * dp);
  const bool fp8 = c.fp8.has_value();
  const bool sp = shape.sequence_parallel;

  const double gemm_rate = gpu.dense_bf16_flops * gpu.gemm_efficiency;
  const double layer_gemm_rate = gemm_rate * (fp8 ? gpu.fp8_gemm_speedup : 1.0);
  const double attention_rate = gpu.dense_bf16_flops * gpu.attention_efficiency;
  const double memory_rate = gpu.hbm_bytes_per_s * gpu.elementwise_efficiency;
  const double ring = (tp - 1) / tp;  // the share of a collective's bytes each rank sends

  // One transformer layer, one micro-batch, forward and backward (3 passes of 2 FLOPs per
  // multiply-add, as Megatron counts).
  StageTime layer;
  const double forward_gemm = 2 * t * (h * qkv + heads_width * h + h * fc1 + f * h) / tp;
  const double forward_attention = 2 * t * s * heads_width / tp;  // QKᵀ and AV, causal half of 4·t·s·width
  layer.gemm = 3 * forward_gemm / layer_gemm_rate;
  layer.attention = 3 * forward_attention / attention_rate;
  // Elements read and written per token forward (the backward about twice as many): two norms
  // (2h each) and residual adds (3h each), split over TP ranks with sequence parallelism and
  // replicated without; the rotary embedding of queries and keys and the activation, split.
  const double replicated = 10 * h / (sp || tp == 1 ? tp : 1.0);
  const double activation = c.gated_linear_unit() ? 3 * f : 2 * f;
  const double forward_memory = kBf16 * t * (replicated + (2 * (heads_width + groups_width) + activation) / tp);
  layer.memory_bound = 3 * forward_memory / memory_rate;
  if (fp8) {
    const double widths = (h + heads_width + h + f) + (qkv + h + fc1 + h);  // the linears' inputs and outputs
    layer.memory_bound += t * widths / tp * gpu.fp8_cast_bytes_per_width / (gpu.hbm_bytes_per_s * gpu.fp8_cast_efficiency);
  }
  // Four collectives forward and four backward, each of the layer's [t, h] activations.
  const double forward_tp_bytes = tp > 1 ? 4 * t * h * kBf16 * ring : 0.0;
  layer.tensor_parallel = 2 * forward_tp_bytes / gpu.tensor_parallel_bytes_per_s;
  if (cp > 1) {
    // Keys and values of t tokens passed cp − 1 times forward, they and their gradients backward;
    // what the attention does not hide, at the rate measured for that (gpu_cost_constants.cpp).
    const double ring_bytes = 3 * (cp - 1) * 2 * t * (groups_width / tp) * kBf16;
    layer.context_parallel = ring_bytes / gpu.context_parallel_exposed_bytes_per_s;
  }
  switch (c.recompute_granularity) {
    case RecomputeGranularity::kNone:
      break;
    case RecomputeGranularity::kSelective:
      if (c.recompute_core_attention) layer.attention += forward_attention / attention_rate;
      // layernorm: the two norms again (2h elements each per token), and under sequence
      // parallelism the input norm's all-gather; mlp: fc1, the activation, fc2 and fc2's
      // reduction again.
      if (c.recompute_layernorm) {
        layer.memory_bound += kBf16 * t * 4 * h / (sp || tp == 1 ? tp : 1.0) / memory_rate;
        if (sp && tp > 1) layer.tensor_parallel += t * h * kBf16 * ring / gpu.tensor_parallel_bytes_per_s;
      }
      if (c.recompute_mlp) {
        layer.gemm += 2 * t * (h * fc1 + f * h) / tp / layer_gemm_rate;
        layer.memory_bound += kBf16 * t * activation / tp / memory_rate;
        if (tp > 1) layer.tensor_parallel += 2 * t * h * kBf16 * ring / gpu.tensor_parallel_bytes_per_s;
      }
      break;
    case RecomputeGranularity::kFull:
      layer.gemm += forward_gemm / layer_gemm_rate;
      layer.attention += forward_attention / attention_rate;
      layer.memory_bound += forward_memory / memory_rate;
      layer.tensor_parallel += forward_tp_bytes / gpu.tensor_parallel_bytes_per_s;
      break;
  }
  // A mixture of experts: its MoE layers' share of every stage's layers (their pattern's average).
  if (c.moe.enabled()) {
    const double share = static_cast<double>(c.moe.num_moe_layers()) / static_cast<double>(c.num_layers);
    StageTime mean = layer.scaled(1 - share);
    mean += moe_layer_time(layer, c, t, tp, layer_gemm_rate, memory_rate, gpu).scaled(share);
    layer = mean;
  }
  // Full recomputation by blocks recomputes only the first N layers of each stage.
  const double layers_per_stage = static_cast<double>(c.num_layers) / pp;
  double recomputed_share = 1.0;
  if (c.recompute_granularity == RecomputeGranularity::kFull && c.recompute_method == RecomputeMethod::kBlock)
    recomputed_share = std::min(1.0, static_cast<double>(c.recompute_num_layers) / layers_per_stage);
  StageTime layers = layer.scaled(layers_per_stage);
  if (recomputed_share < 1.0) {
    // The recomputed layers as above, the rest without their extra forward.
    StageTime base;
    base.gemm = 3 * forward_gemm / layer_gemm_rate;
    base.attention = 3 * forward_attention / attention_rate;
    base.memory_bound = layer.memory_bound - forward_memory / memory_rate;
    base.tensor_parallel = 2 * forward_tp_bytes / gpu.tensor_parallel_bytes_per_s;
    base.context_parallel = layer.context_parallel;
    base.expert_parallel = layer.expert_parallel;
    layers = layer.scaled(layers_per_stage * recomputed_share);
    layers += base.scaled(layers_per_stage * (1 - recomputed_share));
  }

  // The embedding (first stage): its sequence-parallel scatter forward and gather backward. The
  // output layer and the loss (last stage): a bf16 GEMM, the vocabulary-parallel logits read and
  // written in fp32 a few times (12 bytes per logit), and the same two collectives.
  StageTime first = layers, last = layers;
  const double edge_tp = tp > 1 ? 2 * t * h * kBf16 * ring / gpu.tensor_parallel_bytes_per_s : 0.0;
  first.tensor_parallel += edge_tp;
  last.tensor_parallel += edge_tp;
  last.gemm += 6 * t * h * vocab / tp / gemm_rate;
  last.memory_bound += t * vocab / tp * 12 / memory_rate;
  StageTime stage;
  if (pp == 1) {
    stage = layers;
    stage.tensor_parallel += 2 * edge_tp;
    stage.gemm = last.gemm;
    stage.memory_bound = last.memory_bound;
  } else {
    stage = first.total() > last.total() ? first : last;
    // Each chunk receives its input and sends its output forward, the gradients backward.
    stage.pipeline_send = 2 * vp * t * h * kBf16 / (sp ? tp : 1.0) / gpu.link_bytes_per_s;
  }

  StepEstimate e;
  const StageTime work = stage.scaled(microbatches);
  e.gemm_seconds = work.gemm;
  e.attention_seconds = work.attention;
  e.memory_bound_seconds = work.memory_bound;
  e.tensor_parallel_seconds = work.tensor_parallel;
  e.context_parallel_seconds = work.context_parallel;
  e.expert_parallel_seconds = work.expert_parallel;
  e.pipeline_send_seconds = work.pipeline_send;
  e.bubble_seconds = (pp - 1) / vp * stage.total();

  // AdamW over this rank's parameters (its shard under the distributed optimizer): fp32 weight,
  // gradient and two moments read, weight and moments written, the bf16 copy written.
  // The gradients are reduced (and the distributed optimizer shards) over DP × CP ranks; the
  // routed experts' over the expert-data-parallel ranks, DP × CP / EP.
  const double experts = static_cast<double>(shape.expert_parameters_per_rank);
  const double dense = static_cast<double>(shape.parameters_per_rank) - experts;
  const double reducers = dp * cp;
  const double expert_reducers = reducers / static_cast<double>(shape.expert_parallel);
  const bool sharded = shape.distributed_optimizer;
  e.optimizer_seconds = (dense / (sharded ? reducers : 1.0) + experts / (sharded ? expert_reducers : 1.0)) * 30 /
                        memory_rate;
  if (reducers > 1) {
    // The fp32 gradients reduced (reduce-scattered, or all-reduced: twice the bytes) and, under the
    // distributed optimizer, the bf16 weights gathered: each rank's share (n − 1)/n of its group's.
    const double moved = dense * (reducers - 1) / reducers + experts * (expert_reducers - 1) / expert_reducers;
    const double reduce_bytes = moved * 4 * (sharded ? 1 : 2);
    const double gather_bytes = sharded ? moved * 2 : 0.0;
    if (!shape.overlap_grad_reduce) {
      e.data_parallel_seconds = (reduce_bytes + gather_bytes) / gpu.link_bytes_per_s;
    } else {
      // Beside the backward of the step's last micro-batch (its buckets are ready only then) the
      // reduction runs slower, and what outlasts that backward is exposed; the gather likewise
      // beside the first micro-batch's forward. A share stays exposed however long the window.
      const double window = stage.total() - stage.pipeline_send;
      const auto exposed = [&](double bytes, double beside) {
        return std::max(bytes / gpu.link_bytes_per_s * gpu.overlapped_reduction_exposed,
                        bytes / gpu.overlapped_reduction_bytes_per_s - beside);
      };
      e.data_parallel_seconds = exposed(reduce_bytes, window * 2 / 3) + exposed(gather_bytes, window / 3);
    }
  }
  e.step_seconds = work.total() + e.bubble_seconds + e.optimizer_seconds + e.data_parallel_seconds;
  const double world = tp * pp * cp * dp;
  const double tokens = static_cast<double>(shape.global_batch_size) * s;
  e.tokens_per_second_per_gpu = tokens / e.step_seconds / world;
  e.mfu = c.num_floating_point_operations(shape.global_batch_size) / (e.step_seconds * world * gpu.dense_bf16_flops);
  return e;
}

}  // namespace mgt
