#include "model/parameter_table.hpp"

#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "core/error.hpp"

namespace mgt {
namespace {

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

void require_divisible(int64_t value, const char* what, int64_t tp) {
  if (value % tp != 0) {
    throw UsageError("model configuration: " + std::string(what) + " (" + std::to_string(value) +
                     ") must be divisible by --tensor-model-parallel-size (" + std::to_string(tp) +
                     ")");
  }
}

// Appends entries, assigning aligned offsets and deriving local shapes and decay flags.
class TableBuilder {
public:
  // `xavier_uniform`: --init-method-xavier-uniform (megatron/training/arguments.py sets
  // torch.nn.init.xavier_uniform_ as both init methods): every weight Megatron draws from a normal
  // is drawn from U(-a, a), a = sqrt(6 / (fan_in + fan_out)) of the whole weight [out, in] (as
  // Megatron with --use-cpu-initialization; its GPU initialisation takes each rank's part), each
  // expert's on its own (Megatron's SequentialMLP).
  TableBuilder(const TensorParallelRank& tp, bool xavier_uniform) : tp_(tp), xavier_uniform_(xavier_uniform) {}

  // Norms and row-parallel biases: replicated, with sequence-parallel gradients.
  void add_sequence_parallel(std::string name, int64_t size, ParameterInit init) {
    add(std::move(name), {size}, kNotPartitioned, init);
    table_.entries.back().sequence_parallel = true;
  }

  // `over` (size > 0): split over those ranks rather than the tensor-parallel ones
  // (ParameterEntry::expert_tensor).
  void add(std::string name, std::vector<int64_t> shape, int64_t partition_dim, ParameterInit init,
           double std = 0.0, int64_t chunks = 1, int64_t block = 1, TensorParallelRank over = {0, 0}) {
    ParameterEntry e;
    e.name = std::move(name);
    e.global_shape = shape;
    e.local_shape = shape;
    if (partition_dim != kNotPartitioned) {
      e.local_shape[static_cast<size_t>(partition_dim)] /= over.size > 0 ? over.size : tp_.size;
      e.expert_tensor = over;
    }
    e.partition_dim = partition_dim;
    e.partition_chunks = chunks;
    e.partition_block = block;
    e.tensor_parallel_replicated = partition_dim == kNotPartitioned;
    e.weight_decay = shape.size() > 1 && !ends_with(e.name, ".bias");
    if (init == ParameterInit::kNormal && xavier_uniform_ && shape.size() == 2) {
      init = ParameterInit::kUniform;
      std = std::sqrt(6.0 / static_cast<double>(shape[0] + shape[1]));
    }
    e.init = init;
    e.init_std = std;
    e.offset = size_;
    const int64_t n = e.numel();
    size_ += (n + kParameterAlignment - 1) / kParameterAlignment * kParameterAlignment;
    table_.entries.push_back(std::move(e));
  }

  void mark_pipeline_duplicate() { table_.entries.back().pipeline_duplicate = true; }
  void mark_expert_parallel() { table_.entries.back().expert_parallel = true; }
  void mark_sequence_parallel() { table_.entries.back().sequence_parallel = true; }
  void mark_tensor_parallel_partial() { table_.entries.back().tensor_parallel_partial = true; }
  // Not split, yet not the same on every tensor-parallel rank (see ExpertWeights::kWholeOwn).
  void mark_tensor_parallel_own() { table_.entries.back().tensor_parallel_replicated = false; }
  int64_t tensor_parallel_size() const { return tp_.size; }
  // Where the expert region starts (see ParameterTable::expert_begin).
  void begin_expert_region() { table_.expert_begin = size_; }

  ParameterTable finish(bool expert_region) {
    if (!expert_region) table_.expert_begin = size_;
    table_.buffer_size = size_;
    return std::move(table_);
  }

private:
  TensorParallelRank tp_;
  bool xavier_uniform_;
  ParameterTable table_;
  int64_t size_ = 0;
};

}  // namespace

int64_t ParameterEntry::numel() const { return product(local_shape); }

int64_t ParameterEntry::global_numel() const { return product(global_shape); }

int64_t ParameterEntry::global_index(int64_t local_index, const TensorParallelRank& tensor) const {
  const TensorParallelRank& tp = partition(tensor);
  if (partition_dim == kNotPartitioned || tp.size == 1) return local_index;
  if (partition_dim == 0) {
    const int64_t inner = numel() / local_shape[0];
    const int64_t local_row = local_index / inner;
    const int64_t rows_per_chunk = local_shape[0] / partition_chunks;  // this rank's slice
    const int64_t chunk = local_row / rows_per_chunk;
    const int64_t global_row =
        chunk * rows_per_chunk * tp.size + tp.rank * rows_per_chunk + local_row % rows_per_chunk;
    return global_row * inner + local_index % inner;
  }
  const int64_t local_cols = local_shape[1];
  const int64_t row = local_index / local_cols;
  return row * global_shape[1] + tp.rank * local_cols + local_index % local_cols;
}

const ParameterEntry* ParameterTable::find(std::string_view name) const {
  for (const ParameterEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const ParameterEntry& ParameterTable::at(std::string_view name) const {
  const ParameterEntry* e = find(name);
  if (e == nullptr) throw Error("no parameter named '" + std::string(name) + "' in this model");
  return *e;
}

std::string layer_prefix(int64_t layer) { return "decoder.layers." + std::to_string(layer); }

void validate_tensor_parallel(const GptConfig& config, const TensorParallelRank& tp) {
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size) {
    throw UsageError("tensor-parallel rank " + std::to_string(tp.rank) + " is outside a group of " +
                     std::to_string(tp.size));
  }
  const GptConfig c = config.resolved();
  require_divisible(c.num_attention_heads, "--num-attention-heads", tp.size);
  // Megatron can replicate key/value groups when there are fewer than tp; mgt shards whole
  // groups only.
  require_divisible(c.query_groups(), "the number of query groups", tp.size);
  require_divisible(c.ffn_hidden_size, "--ffn-hidden-size", tp.size);
  require_divisible(c.padded_vocab_size, "the padded vocabulary size", tp.size);
}

namespace {

// How an MoE MLP's weights lie over the tensor-parallel ranks.
enum class ExpertWeights {
  kSplit,  // split as the dense MLP's (the shared experts; the routed ones at Megatron's default)
  // --expert-tensor-parallel-size 1 with one expert-parallel rank: every expert whole on every
  // tensor-parallel rank (replicated), each rank's gradient that of its part of the sequence
  // (sequence_parallel).
  kWholeReplicated,
  // --expert-tensor-parallel-size 1 with expert parallelism: whole, and this rank's own (the
  // expert-parallel group cuts across the tensor-parallel ranks, dist/parallel_layout.hpp), so
  // counted on every rank and reduced over the expert-data-parallel group only.
  kWholeOwn,
  // --expert-tensor-parallel-size other than 1 and the tensor-parallel size: split as the dense
  // MLP's, over the expert-tensor-parallel ranks (ExpertParallelRank::tensor_size), this rank's
  // own and reduced over the expert-data-parallel group.
  kSplitExpertTensor,
};

// An MoE layer's MLP (model/moe_layer.hpp) with Megatron-Core's names: the router's weight
// [experts, h], each expert's linear_fc1 and linear_fc2 as SequentialMLP names them
// (experts.local_experts.{j}), and the shared experts' (shared_experts). No biases: Megatron's
// MoE layers have none. Initialised as the dense MLP (the router with init_method).
// With expert parallelism the routed experts are left to add_routed_experts, after the rest.
void add_moe_mlp(TableBuilder& b, const GptConfig& c, const std::string& prefix, int64_t ffn, double std,
                 double scaled_std, bool expert, ExpertWeights weights = ExpertWeights::kSplit,
                 TensorParallelRank over = {0, 0}) {
  const int64_t chunks = c.gated_linear_unit() ? 2 : 1;
  const bool whole = weights == ExpertWeights::kWholeReplicated || weights == ExpertWeights::kWholeOwn;
  const auto mark = [&] {
    if (expert) b.mark_expert_parallel();
    if (weights == ExpertWeights::kWholeReplicated) b.mark_sequence_parallel();
    if (weights == ExpertWeights::kWholeOwn) b.mark_tensor_parallel_own();
  };
  b.add(prefix + ".linear_fc1.weight", {chunks * ffn, c.hidden_size}, whole ? kNotPartitioned : 0,
        ParameterInit::kNormal, std, whole ? 1 : chunks, 1, over);
  mark();
  b.add(prefix + ".linear_fc2.weight", {c.hidden_size, ffn}, whole ? kNotPartitioned : 1, ParameterInit::kNormal,
        scaled_std, 1, 1, over);
  mark();
}

// This expert-parallel rank's routed experts of one MoE layer, by their global index.
void add_routed_experts(TableBuilder& b, const GptConfig& c, const std::string& mlp, const ExpertParallelRank& ep,
                        double std, double scaled_std) {
  const ExpertWeights weights = ep.tensor_size > 0                               ? ExpertWeights::kSplitExpertTensor
                                : !c.moe.experts_whole(b.tensor_parallel_size()) ? ExpertWeights::kSplit
                                : ep.size > 1                                    ? ExpertWeights::kWholeOwn
                                                                                 : ExpertWeights::kWholeReplicated;
  const TensorParallelRank over = ep.tensor_size > 0 ? TensorParallelRank{ep.tensor_size, ep.tensor_rank}
                                                     : TensorParallelRank{0, 0};
  for (int64_t j = 0; j < c.moe.num_experts / ep.size; ++j)
    add_moe_mlp(b, c, mlp + ".experts.local_experts." + std::to_string(ep.global_expert(c.moe.num_experts, j)),
                c.moe.ffn_hidden_size, std, scaled_std, true, weights, over);
}

// Whether the routed experts have a region of their own (ParameterTable::expert_begin).
bool has_expert_region(const ExpertParallelRank& ep) { return ep.size > 1 || ep.tensor_size > 0; }

void add_moe_parameters(TableBuilder& b, const GptConfig& c, const std::string& mlp, const ExpertParallelRank& ep,
                        double std, double scaled_std) {
  b.add(mlp + ".router.weight", {c.moe.num_experts, c.hidden_size}, kNotPartitioned, ParameterInit::kNormal, std);
  if (!has_expert_region(ep)) add_routed_experts(b, c, mlp, ep, std, scaled_std);
  if (c.moe.shared_expert_intermediate_size > 0)
    add_moe_mlp(b, c, mlp + ".shared_experts", c.moe.shared_expert_intermediate_size, std, scaled_std, false);
  // SharedExpertMLP's gate_weight [1, h] (shared_experts.py), initialised with init_method and
  // replicated over the tensor-parallel ranks. Every rank computes it on the whole sequence (the
  // MoE layer gathers it, model/moe_layer.hpp), so the gradients agree without a reduction, as
  // Megatron's, computed on each rank's part and marked sequence_parallel, do after theirs.
  if (c.moe.shared_expert_gate)
    b.add(mlp + ".shared_experts.gate_weight", {1, c.hidden_size}, kNotPartitioned, ParameterInit::kNormal, std);
}

}  // namespace

ParameterTable gpt_parameter_table(const GptConfig& config, const TensorParallelRank& tp,
                                   const PipelineStage& stage, const ExpertParallelRank& ep) {
  const GptConfig c = config.resolved();
  validate_tensor_parallel(c, tp);
  if (ep.size < 1 || ep.rank < 0 || ep.rank >= ep.size || (c.moe.enabled() && c.moe.num_experts % ep.size != 0))
    throw UsageError("expert-parallel rank " + std::to_string(ep.rank) + " of " + std::to_string(ep.size) +
                     " cannot hold an equal share of " + std::to_string(c.moe.num_experts) + " experts");
  if (ep.tensor_size < 0 || (ep.tensor_size > 0 && (ep.tensor_rank < 0 || ep.tensor_rank >= ep.tensor_size ||
                                                    (c.moe.enabled() && c.moe.ffn_hidden_size % ep.tensor_size != 0))))
    throw UsageError("expert-tensor-parallel rank " + std::to_string(ep.tensor_rank) + " of " +
                     std::to_string(ep.tensor_size) + " cannot hold an equal share of the experts' " +
                     std::to_string(c.moe.ffn_hidden_size) + " hidden units");
  const int64_t h = c.hidden_size;
  const double std = c.init_method_std;
  // Output projections of each residual branch: N(0, σ/√(2L)) (Megatron's scaled_init_method).
  const double scaled_std = std / std::sqrt(2.0 * static_cast<double>(c.num_layers));
  const bool layer_norm = c.normalization == Normalization::kLayerNorm;
  const int64_t attention_width = c.num_attention_heads * c.kv_channels;
  const int64_t fc1_chunks = c.gated_linear_unit() ? 2 : 1;
  // One query group's rows of the fused QKV projection (see ParameterEntry::partition_block).
  const int64_t qkv_block = (c.num_attention_heads / c.query_groups() + 2) * c.kv_channels;

  TableBuilder b(tp, c.init_method_xavier_uniform);
  auto add_norm = [&](const std::string& prefix) {
    // Megatron initialises a zero-centred gamma to 0 (init.zeros_ in its norms' reset_parameters).
    b.add_sequence_parallel(prefix + ".weight", h,
                            c.layernorm_zero_centered_gamma ? ParameterInit::kZeros : ParameterInit::kOnes);
    if (layer_norm) b.add_sequence_parallel(prefix + ".bias", h, ParameterInit::kZeros);
  };

  // A query or key norm (--qk-layernorm): one head wide, shared by the heads of every rank.
  auto add_head_norm = [&](const std::string& prefix) {
    b.add(prefix + ".weight", {c.kv_channels}, kNotPartitioned,
          c.layernorm_zero_centered_gamma ? ParameterInit::kZeros : ParameterInit::kOnes);
    b.mark_tensor_parallel_partial();
    if (!layer_norm) return;
    b.add(prefix + ".bias", {c.kv_channels}, kNotPartitioned, ParameterInit::kZeros);
    b.mark_tensor_parallel_partial();
  };

  auto add_word_embedding = [&] {
    b.add("embedding.word_embeddings.weight", {c.padded_vocab_size, h}, 0, ParameterInit::kNormal,
          std);
  };
  if (stage.is_first()) {
    add_word_embedding();
    if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
      b.add("embedding.position_embeddings.weight", {c.max_position_embeddings, h},
            kNotPartitioned, ParameterInit::kNormal, std);
    }
  }
  // The stage's layers in their global order (an interleaved rank's chunks one after another);
  // names keep the global numbers, so checkpoints do not depend on the split.
  const int64_t stage_layers = stage.layers_of(c.num_layers);
  const int64_t first_layer = stage.layer_at(0, c.num_layers);
  const int64_t end_layer = stage.layer_at(stage_layers - 1, c.num_layers) + 1;
  if (first_layer < 0 || end_layer > c.num_layers || stage.rank < 0 || stage.rank >= stage.size ||
      stage_layers % stage.virtual_size != 0)
    throw Error("pipeline stage " + std::to_string(stage.rank) + " of " + std::to_string(stage.size) +
                " holds layers [" + std::to_string(first_layer) + ", " + std::to_string(end_layer) +
                "), outside the model's " + std::to_string(c.num_layers));
  for (int64_t local = 0; local < stage_layers; ++local) {
    const int64_t i = stage.layer_at(local, c.num_layers);
    const std::string layer = layer_prefix(i);
    add_norm(layer + ".input_layernorm");
    const std::string qkv = layer + ".self_attention.linear_qkv";
    b.add(qkv + ".weight", {c.qkv_size(), h}, 0, ParameterInit::kNormal, std, 1, qkv_block);
    if (c.qkv_has_bias()) {
      b.add(qkv + ".bias", {c.qkv_size()}, 0, ParameterInit::kZeros, 0.0, 1, qkv_block);
    }
    if (c.qk_layernorm) {
      add_head_norm(layer + ".self_attention.q_layernorm");
      add_head_norm(layer + ".self_attention.k_layernorm");
    }
    const std::string proj = layer + ".self_attention.linear_proj";
    b.add(proj + ".weight", {h, attention_width}, 1, ParameterInit::kNormal, scaled_std);
    if (c.add_bias_linear) b.add_sequence_parallel(proj + ".bias", h, ParameterInit::kZeros);
    add_norm(layer + ".pre_mlp_layernorm");
    if (c.moe.is_moe_layer(i)) {
      add_moe_parameters(b, c, layer + ".mlp", ep, std, scaled_std);
      continue;
    }
    const std::string fc1 = layer + ".mlp.linear_fc1";
    b.add(fc1 + ".weight", {c.fc1_size(), h}, 0, ParameterInit::kNormal, std, fc1_chunks);
    if (c.add_bias_linear) {
      b.add(fc1 + ".bias", {c.fc1_size()}, 0, ParameterInit::kZeros, 0.0, fc1_chunks);
    }
    const std::string fc2 = layer + ".mlp.linear_fc2";
    b.add(fc2 + ".weight", {h, c.ffn_hidden_size}, 1, ParameterInit::kNormal, scaled_std);
    if (c.add_bias_linear) b.add_sequence_parallel(fc2 + ".bias", h, ParameterInit::kZeros);
  }
  // Megatron's expert-parallel buffers: the routed experts after the rest of the stage.
  const bool expert_region = has_expert_region(ep) && c.moe.enabled();
  const auto finish = [&] {
    if (expert_region) {
      b.begin_expert_region();
      for (int64_t local = 0; local < stage_layers; ++local) {
        const int64_t i = stage.layer_at(local, c.num_layers);
        if (c.moe.is_moe_layer(i)) add_routed_experts(b, c, layer_prefix(i) + ".mlp", ep, std, scaled_std);
      }
    }
    return b.finish(expert_region);
  };
  if (!stage.is_last()) return finish();
  add_norm("decoder.final_layernorm");
  if (c.untie_embeddings_and_output_weights) {
    b.add("output_layer.weight", {c.padded_vocab_size, h}, 0, ParameterInit::kNormal, std);
  } else if (!stage.is_first()) {
    // Initialised from the same (seed, name) as the first stage's, so the copies start equal
    // without the all-reduce Megatron uses for it.
    add_word_embedding();
    b.mark_pipeline_duplicate();
  }
  return finish();
}

bool is_embedding_or_output_parameter(const ParameterEntry& entry) {
  return entry.name == "embedding.word_embeddings.weight" || entry.name == "output_layer.weight";
}

}  // namespace mgt
