#include "model/memory_estimate.hpp"

#include <algorithm>

#include "core/checked_size.hpp"
#include "core/error.hpp"
#include "model/activation_memory.hpp"

namespace mgt {

namespace {

using N = SaturatingSize;

void require_layout(const ParallelLayout& l) {
  if (l.tensor_parallel < 1 || l.pipeline_parallel < 1 || l.data_parallel < 1 || l.context_parallel < 1)
    throw Error("internal error: a parallel layout needs sizes of at least 1");
}

// The ranks an expert's weights are split over (expert-tensor parallelism): 1 where each is whole
// on every tensor-parallel rank (--expert-tensor-parallel-size 1), the expert-tensor size on a
// grid of its own, else the tensor-parallel size.
std::int64_t expert_weight_split(const MoeConfig& moe, std::int64_t tp) {
  if (moe.experts_whole(tp)) return 1;
  return moe.experts_on_own_tensor_grid(tp) ? moe.expert_tensor_parallel_size : tp;
}

// Activation buffers hold floats of the activation type, statistics fp32 floats, index buffers
// int64 (ActivationElements::bytes).
N activation_bytes(const ActivationElements& e, std::int64_t bytes_per_float) { return e.bytes(bytes_per_float); }

// The weights of the linear layers of the largest pipeline stage that compute in FP8 (the four of
// each FP8 layer; in a mixture-of-experts layer attention's two, the shared experts' and every
// local expert's two), per rank.
N fp8_linear_weights(const GptConfig& c, const ParallelLayout& l) {
  if (!c.fp8) return 0;
  const N h = c.hidden_size;
  const std::int64_t tp = l.tensor_parallel;
  const N qkv = (N(c.num_attention_heads) + N(2) * c.query_groups()) * c.kv_channels;
  const N attention = divide_up(qkv * h, tp) + divide_up(h * (N(c.num_attention_heads) * c.kv_channels), tp);
  const N mlp = divide_up(N(c.fc1_size()) * h, tp) + divide_up(h * c.ffn_hidden_size, tp);
  const std::int64_t per_stage = divide_up(N(c.num_layers), l.pipeline_parallel).value();
  std::int64_t fp8_layers = 0;
  std::int64_t dense_fp8_layers = 0;
  std::int64_t moe_fp8_layers = 0;
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    if (!c.fp8->layer_in_fp8(layer, c.num_layers)) continue;
    ++fp8_layers;
    ++(c.moe.is_moe_layer(layer) ? moe_fp8_layers : dense_fp8_layers);
  }
  N moe = 0;
  if (moe_fp8_layers > 0) {
    const std::int64_t gated = c.gated_linear_unit() ? 2 : 1;
    const std::int64_t etp = expert_weight_split(c.moe, tp);
    const N expert = divide_up(N(gated + 1) * c.moe.ffn_hidden_size * h, etp);
    const N shared = divide_up(N(gated + 1) * c.moe.shared_expert_intermediate_size * h, tp);
    moe = N(c.moe.num_experts / std::max<std::int64_t>(1, c.moe.expert_model_parallel_size)) * expert + shared;
  }
  return N(std::min(per_stage, fp8_layers)) * attention + N(std::min(per_stage, dense_fp8_layers)) * mlp +
         N(std::min(per_stage, moe_fp8_layers)) * moe;
}

// The FP8 codes a training forward keeps of its FP8 linear layers' inputs, transposed, for their
// weight gradients (Fp8Training::keep_input_columns), per micro-batch of `tokens` tokens on the
// largest pipeline stage (model chunk, interleaved): each layer's linear_qkv and linear_fc1 inputs
// [tokens, h], linear_proj's [tokens, heads·kv/tp] and linear_fc2's [tokens, ffn/tp], one byte
// each. None under sequence parallelism (its layers cast their inputs block by block), full
// recomputation (`recompute`) or --no-fp8-wgrad.
N fp8_kept_input_bytes(const GptConfig& c, const ParallelLayout& l, std::int64_t tokens, RecomputeGranularity recompute) {
  if (!c.fp8 || !c.fp8->wgrad || recompute == RecomputeGranularity::kFull) return 0;
  const std::int64_t tp = l.tensor_parallel;
  if (l.sequence_parallel && tp > 1) return 0;
  const N attention = N(tokens) * (N(c.hidden_size) + N(c.num_attention_heads / tp) * c.kv_channels);
  const N mlp = N(tokens) * (N(c.hidden_size) + c.ffn_hidden_size / tp);
  const std::int64_t per_chunk = divide_up(N(c.num_layers), l.pipeline_parallel * l.virtual_pipeline).value();
  std::int64_t fp8_layers = 0;
  std::int64_t dense_fp8_layers = 0;
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    if (!c.fp8->layer_in_fp8(layer, c.num_layers)) continue;
    ++fp8_layers;
    if (!c.moe.is_moe_layer(layer)) ++dense_fp8_layers;
  }
  return N(std::min(per_chunk, fp8_layers)) * attention + N(std::min(per_chunk, dense_fp8_layers)) * mlp;
}

std::string bytes_text(std::int64_t bytes) {
  return SaturatingSize(bytes).saturated() ? "more than " + format_bytes(static_cast<double>(bytes))
                                           : format_bytes(static_cast<double>(bytes));
}

// cuBLASLt's workspace, allocated once (kernels/cuda/lt_matmul.cpp kWorkspaceBytes).
constexpr std::int64_t kGemmWorkspaceBytes = std::int64_t{32} << 20;

// The scratch of cuDNN attention's backward (kernels/cuda/cudnn_attention.cpp), allocated while
// the activations of every micro-batch in flight are held: the softmax statistics and the query
// gradient's accumulator in fp32, and with fp32 activations 2-byte copies of the queries, keys,
// values, output and their gradients.
N attention_backward_scratch(const GptConfig& c, std::int64_t tp, std::int64_t seq, std::int64_t batch,
                             std::int64_t bytes_per_activation) {
  const N heads = c.num_attention_heads / tp;
  const N rows = N(batch) * heads * seq;
  const N queries = rows * c.kv_channels;
  const N keys = N(batch) * seq * (c.query_groups() / tp) * c.kv_channels;
  N bytes = rows * 4 + queries * 4;
  if (bytes_per_activation == 4) bytes += queries * 8 + keys * 8;
  return bytes;
}

// An MoE layer's routed experts on one rank (the parameter table's entries,
// megatron/core/transformer/moe): its num_experts / EP experts (fc1 and fc2, no biases), split
// over the expert-tensor ranks.
N routed_experts_per_rank(const GptConfig& c, std::int64_t tp) {
  if (!c.moe.enabled()) return 0;
  const N gated = c.gated_linear_unit() ? 2 : 1;
  const std::int64_t ep = std::max<std::int64_t>(1, c.moe.expert_model_parallel_size);
  const N expert = divide_up((gated + N(1)) * c.moe.ffn_hidden_size * c.hidden_size, expert_weight_split(c.moe, tp));
  return N(c.moe.num_experts / ep) * expert;
}

// An MoE layer's MLP on one rank: the router, replicated; the routed experts; the shared experts
// split over the tensor-parallel ranks, their gate replicated.
N moe_mlp_parameters_per_rank(const GptConfig& c, std::int64_t tp) {
  if (!c.moe.enabled()) return 0;
  const N h = c.hidden_size;
  const N gated = c.gated_linear_unit() ? 2 : 1;
  const N shared = divide_up((gated + N(1)) * c.moe.shared_expert_intermediate_size * h, tp);
  return N(c.moe.num_experts) * h + routed_experts_per_rank(c, tp) + shared + N(c.moe.shared_expert_gate ? 1 : 0) * h;
}

// The routed experts' parameters on the pipeline stage with the most MoE layers, per rank.
N routed_expert_parameters(const GptConfig& c, const ParallelLayout& l) {
  const std::int64_t per_stage = divide_up(N(c.num_layers), l.pipeline_parallel).value();
  std::int64_t most = 0;
  for (std::int64_t first = 0; first < c.num_layers; first += per_stage) {
    std::int64_t moe_layers = 0;
    for (std::int64_t layer = first; layer < std::min(c.num_layers, first + per_stage); ++layer)
      moe_layers += c.moe.is_moe_layer(layer) ? 1 : 0;
    most = std::max(most, moe_layers);
  }
  return N(most) * routed_experts_per_rank(c, l.tensor_parallel);
}

}  // namespace

std::int64_t routed_expert_parameters_per_rank(const GptConfig& config, const ParallelLayout& layout) {
  return routed_expert_parameters(config.resolved(), layout).value();
}

std::int64_t parameters_per_rank(const GptConfig& config, const ParallelLayout& layout) {
  require_layout(layout);
  const GptConfig c = config.resolved();
  const std::int64_t tp = layout.tensor_parallel;
  const std::int64_t pp = layout.pipeline_parallel;
  const N h = c.hidden_size;
  const N bias = c.add_bias_linear ? 1 : 0;
  const N norm = c.normalization == Normalization::kLayerNorm ? h * 2 : h;
  const N qkv = (N(c.num_attention_heads) + N(2) * c.query_groups()) * c.kv_channels;
  const N attention_width = N(c.num_attention_heads) * c.kv_channels;
  const N fc1 = c.gated_linear_unit() ? N(2) * c.ffn_hidden_size : N(c.ffn_hidden_size);

  // Column-parallel layers split their output rows (and bias); row-parallel ones their input
  // columns, their bias replicated (megatron/core/tensor_parallel/layers.py).
  const N attention_layer = norm * 2 + c.qk_norm_parameters()  // the norms (and q/k norms), replicated
                            + divide_up(qkv * h + N(c.qkv_has_bias() ? 1 : 0) * qkv, tp)  // linear_qkv, column-parallel
                            + divide_up(h * attention_width, tp) + bias * h;  // linear_proj, row-parallel
  const N dense_mlp = divide_up(fc1 * h + bias * fc1, tp)      // linear_fc1, column-parallel
                      + divide_up(h * c.ffn_hidden_size, tp) + bias * h;  // linear_fc2, row-parallel
  const N moe_mlp = moe_mlp_parameters_per_rank(c, tp);
  const N vocab_shard = divide_up(N(c.padded_vocab_size), tp) * h;  // vocab-parallel embedding
  const N positions =
      c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute ? N(c.max_position_embeddings) * h : N(0);
  // A tied output layer is the word embedding itself, unless the pipeline puts it on another
  // stage, which then keeps its own copy.
  const N output = c.untie_embeddings_and_output_weights || pp > 1 ? vocab_shard : N(0);
  // Each stage's layers (an MoE layer's MLP in place of the dense one), the embeddings on the
  // first, the final norm and the output layer on the last: the largest stage's.
  const std::int64_t layers_per_stage = divide_up(N(c.num_layers), pp).value();
  std::int64_t largest = 0;
  for (std::int64_t stage = 0; stage < pp; ++stage) {
    N params = 0;
    for (std::int64_t layer = stage * layers_per_stage; layer < std::min(c.num_layers, (stage + 1) * layers_per_stage);
         ++layer)
      params += attention_layer + (c.moe.is_moe_layer(layer) ? moe_mlp : dense_mlp);
    if (stage == 0) params += vocab_shard + positions;
    if (stage == pp - 1) params += norm + output;
    largest = std::max(largest, params.value());
  }
  return largest;
}

MemoryEstimate estimate_memory(const GptConfig& config, const MemoryEstimateRequest& r) {
  require_layout(r.layout);
  if (r.seq_length < 1 || r.micro_batch_size < 1)
    throw Error("internal error: a memory estimate needs a sequence length and a micro-batch size");
  const GptConfig c = config.resolved();
  const ParallelLayout& l = r.layout;
  MemoryEstimate e;
  // The whole model on one rank: every expert too, whatever the expert-parallel flags say.
  GptConfig whole = c;
  whole.moe.expert_model_parallel_size = 1;
  whole.moe.expert_tensor_parallel_size = 1;
  e.parameters = parameters_per_rank(whole, ParallelLayout{});
  e.parameters_per_rank = parameters_per_rank(c, l);
  const N p = e.parameters_per_rank;

  if (r.use == MemoryUse::kConversion) {
    // The weights read, a reordered copy of one format's layout, the buffer written from.
    e.weight_bytes = (p * 4 * 3).value();
    e.total_bytes = e.weight_bytes;
    e.beyond_64_bits = N(e.total_bytes).saturated() || N(e.parameters).saturated();
    return e;
  }
  e.weight_bytes = (p * r.bytes_per_weight).value();
  if (r.master_weights) e.master_weight_bytes = (p * 4).value();
  // A training model holds an fp32 gradient buffer of its parameters' layout
  // (model/gpt_parameters.hpp), whole on every rank (Megatron's main_grad); one built for
  // evaluation or generation holds none.
  if (r.use == MemoryUse::kTraining) e.gradient_bytes = (p * 4).value();
  const std::int64_t optimizer_shards = l.distributed_optimizer ? l.data_parallel * l.context_parallel : 1;
  if (r.use == MemoryUse::kTraining) {
    // The distributed optimizer shards the routed experts over their expert-data-parallel group,
    // world / (expert-tensor × EP × PP) ranks (Megatron's expert grid), the rest over DP × CP.
    const N experts = routed_expert_parameters(c, l);
    const std::int64_t expert_shards =
        l.distributed_optimizer
            ? std::max<std::int64_t>(1, l.tensor_parallel * l.data_parallel * l.context_parallel /
                                            (expert_weight_split(c.moe, l.tensor_parallel) *
                                             std::max<std::int64_t>(1, c.moe.expert_model_parallel_size)))
            : 1;
    const N others = p.saturated() || experts.saturated() ? p : N(p.value() - experts.value());
    e.optimizer_bytes = (divide_up(others * r.moment_bytes, optimizer_shards) +
                         divide_up(experts * r.moment_bytes, expert_shards)).value();
    if (r.bf16_gradient_copy) e.gradient_bytes = (p * 6).value();
  }
  if (r.use == MemoryUse::kTraining || r.use == MemoryUse::kEvaluation)
    e.fp8_weight_bytes = (fp8_linear_weights(c, l) * 2).value();

  GptConfig stage = c;  // the layers of one pipeline stage (interleaved: of one model chunk)
  stage.num_layers = divide_up(N(c.num_layers), l.pipeline_parallel * l.virtual_pipeline).value();
  // Its MoE layers: the first stage's (its first chunk's), the first of the model's.
  if (stage.moe.enabled()) stage.moe.layer_pattern.resize(static_cast<std::size_t>(stage.num_layers));
  // Micro-batches each stage keeps in flight (GptModel's stage slots, train/pipeline_schedule.hpp):
  // 1F1B, min(P − stage, M), the most on the first stage, which has no output layer; the last
  // stage keeps one, with the output layer's logits and loss. The interleaved schedule: the first
  // rank's warm-up forwards, 2(P − 1) + (V − 1)·G, plus one, each a chunk's, at most M·V
  // (megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches); the last rank holds
  // the output layer's buffers of at least one.
  const std::int64_t group = l.microbatch_group > 0 ? l.microbatch_group : l.pipeline_parallel;
  std::int64_t in_flight = l.virtual_pipeline > 1
                               ? 2 * (l.pipeline_parallel - 1) + (l.virtual_pipeline - 1) * group + 1
                               : l.pipeline_parallel;
  if (r.num_microbatches > 0) in_flight = std::min(in_flight, r.num_microbatches * l.virtual_pipeline);
  const bool pipelined = l.pipeline_parallel > 1;
  const std::int64_t tp = l.tensor_parallel;
  const bool sp = l.sequence_parallel && tp > 1;
  const std::int64_t s = r.seq_length;
  const std::int64_t b = r.micro_batch_size;
  const std::int64_t bytes = r.bytes_per_weight;
  N activations = 0;
  N kv_cache = 0;
  switch (r.use) {
    case MemoryUse::kTraining: {
      // The micro-batches in flight share full recomputation's scratch. A whole model without
      // tensor parallelism computes its logits in chunks (GptModel::forward_backward).
      const std::int64_t local_seq = s / l.context_parallel;
      const auto training_activations = [&](const GptConfig& config) {
        const auto slots = [&](std::int64_t count, bool with_output) {
          const ActivationElements slot = ActivationMemory::elements(
              config, tp, local_seq, b, true, false, sp, with_output,
              tp == 1 && !pipelined ? kTrainingLogitsChunk : 0);
          const ActivationElements shared = ActivationMemory::recompute_scratch_elements(config, tp, local_seq, b, sp);
          // (A count beyond 64 bits stays saturated.)
          const ActivationElements unshared =
              N(slot.floats).saturated()
                  ? slot
                  : ActivationElements{slot.floats - shared.floats, slot.fp32_floats - shared.fp32_floats, slot.indices};
          return activation_bytes(unshared, bytes) * count + activation_bytes(shared, bytes);
        };
        N total = pipelined ? std::max(slots(in_flight, false).value(), slots(1, true).value()) : slots(1, true);
        if (l.context_parallel > 1) {
          AttentionShape local;
          local.batch = b;
          local.seq_q = local.seq_kv = local_seq;
          local.heads = c.num_attention_heads / tp;
          local.groups = c.query_groups() / tp;
          local.head_dim = c.kv_channels;
          total += N(context_parallel_scratch_elements(l.cp_comm_type, local)) * bytes;
        }
        if (r.evaluation_too) total += activation_bytes(ActivationMemory::elements(config, tp, s, b, false), bytes);
        total += fp8_kept_input_bytes(c, l, local_seq * b, config.recompute_granularity) * (pipelined ? in_flight : 1);
        return total;
      };
      activations = training_activations(stage);
      GptConfig without = stage;
      without.recompute_granularity = RecomputeGranularity::kNone;
      e.activation_bytes_without_recomputation = training_activations(without).value();
      break;
    }
    case MemoryUse::kEvaluation:
      activations = activation_bytes(ActivationMemory::elements(stage, tp, s, b, false), bytes);
      break;
    case MemoryUse::kGeneration:
      activations = activation_bytes(ActivationMemory::elements(stage, tp, s, b, false, true), bytes);
      // Keys and values of every layer: [capacity, batch, groups, head_dim] each (model/kv_cache.hpp).
      kv_cache = N(2) * stage.num_layers * b * s * (c.query_groups() / tp) * c.kv_channels * bytes;
      break;
    case MemoryUse::kConversion:
      break;
  }
  if (r.cuda_workspaces && r.use == MemoryUse::kTraining)
    e.workspace_bytes =
        (attention_backward_scratch(c, tp, s / l.context_parallel, b, bytes) + kGemmWorkspaceBytes).value();
  e.activation_bytes = activations.value();
  if (r.use != MemoryUse::kTraining) e.activation_bytes_without_recomputation = e.activation_bytes;
  e.kv_cache_bytes = kv_cache.value();
  e.total_bytes = (N(e.weight_bytes) + e.master_weight_bytes + e.fp8_weight_bytes + e.gradient_bytes +
                   e.optimizer_bytes + e.activation_bytes + e.kv_cache_bytes + e.workspace_bytes)
                      .value();
  e.beyond_64_bits = N(e.total_bytes).saturated() || N(e.parameters).saturated();
  return e;
}

std::string describe_memory_estimate(const MemoryEstimate& e) {
  std::string out;
  auto add = [&](const char* name, std::int64_t bytes) {
    if (bytes == 0) return;
    out += (out.empty() ? "" : " + ") + std::string(name) + " " + bytes_text(bytes);
  };
  add("weights", e.weight_bytes);
  add("master weights", e.master_weight_bytes);
  add("FP8 weight copies", e.fp8_weight_bytes);
  add("gradients", e.gradient_bytes);
  add("Adam moments", e.optimizer_bytes);
  add("activations", e.activation_bytes);
  add("key/value cache", e.kv_cache_bytes);
  add("workspaces", e.workspace_bytes);
  return out.empty() ? "nothing" : out;
}

void require_memory(const MemoryEstimate& e, const std::optional<AvailableMemory>& available, const std::string& what) {
  // Beyond 64 bits nothing can hold it, whatever is known of the memory.
  if (!e.beyond_64_bits && (!available || e.total_bytes <= available->bytes)) return;
  const std::string parameters = N(e.parameters).saturated() ? "more than 9.2e18" : std::to_string(e.parameters);
  throw Error(what + " needs an estimated " + bytes_text(e.total_bytes) + " of memory per rank for " + parameters +
              " parameters (" + describe_memory_estimate(e) + ")" +
              (available ? ", but only " + format_bytes(static_cast<double>(available->bytes)) + " is available (" +
                               available->source + ")"
                         : std::string()));
}

std::optional<AvailableMemory> memory_available_to(const Backend& backend) {
  return backend.available_memory();
}

MemoryEstimate check_memory(const GptConfig& config, const MemoryEstimateRequest& request,
                            const std::optional<AvailableMemory>& available, const std::string& what) {
  MemoryEstimate e;
  try {
    e = estimate_memory(config, request);
  } catch (const Error& error) {
    throw Error(what + ": " + error.what(), error.exit_code());
  }
  require_memory(e, available, what);
  return e;
}

void inference_weight_bytes(const GptConfig& config, const Backend& backend, MemoryEstimateRequest& request) {
  request.bytes_per_weight = float_type_size(backend.activation_type());
  request.master_weights = request.bytes_per_weight != 4 &&
                           keeps_fp32_parameters(ParameterUse::kInference, backend.activation_type(), config);
}

}  // namespace mgt
