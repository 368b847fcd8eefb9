#include "train/moe_upcycling_load.hpp"

#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ckpt/sharded_checkpoint.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt/tensor_record.hpp"
#include "core/error.hpp"
#include "model/parameter_sharding.hpp"
#include "model/parameter_table.hpp"
#include "train/checkpoint_parameter_read.hpp"

namespace mgt {

namespace {

constexpr std::string_view kRoutedExperts = ".experts.local_experts.";

// A routed expert's weight by its parameter name: "<layer>.mlp.experts.local_experts.<j>.linear_fc1.weight".
struct RoutedExpertWeight {
  std::string mlp;  // "<layer>.mlp"
  std::int64_t expert = 0;
  bool fc1 = false;  // else linear_fc2
};

std::optional<RoutedExpertWeight> routed_expert_weight(const std::string& name) {
  const std::size_t at = name.find(kRoutedExperts);
  if (at == std::string::npos) return std::nullopt;
  const std::string rest = name.substr(at + kRoutedExperts.size());
  const std::size_t dot = rest.find('.');
  return RoutedExpertWeight{name.substr(0, at), std::stoll(rest.substr(0, dot)),
                            rest.substr(dot + 1) == "linear_fc1.weight"};
}

// One MoE layer's dense MLP, read once for all of that layer's experts on this rank.
struct DenseMlp {
  std::string mlp;
  std::vector<float> fc1;  // [chunks · dense_ffn, hidden]
  std::vector<float> fc2;  // [hidden, dense_ffn]
};

class DenseCheckpointReader {
public:
  DenseCheckpointReader(const ckpt::ShardedCheckpoint& reader, const GptConfig& config, std::int64_t dense_ffn)
      : reader_(reader), config_(config), dense_ffn_(dense_ffn) {}

  const DenseMlp& mlp(const std::string& mlp) {
    if (cached_.mlp == mlp) return cached_;
    const std::int64_t chunks = config_.gated_linear_unit() ? 2 : 1;
    cached_.mlp = mlp;
    cached_.fc1 = read(mlp + ".linear_fc1.weight", {chunks * dense_ffn_, config_.hidden_size});
    cached_.fc2 = read(mlp + ".linear_fc2.weight", {config_.hidden_size, dense_ffn_});
    return cached_;
  }

private:
  std::vector<float> read(const std::string& name, std::vector<std::int64_t> shape) {
    const std::string path = ckpt::model_tensor_path(name);
    if (!reader_.contains(path))
      throw Error("checkpoint " + reader_.directory() + " has no tensor '" + path +
                  "': --moe-use-upcycling reads each MoE layer's experts from the dense model's MLP there");
    if (reader_.global_shape(path) != shape)
      throw Error("checkpoint " + reader_.directory() + ": tensor '" + path + "' has shape " +
                  ckpt::format_shape(reader_.global_shape(path)) + ", not " + ckpt::format_shape(shape) +
                  ": --moe-use-upcycling reads a dense MLP of --ffn-hidden-size (" +
                  std::to_string(config_.ffn_hidden_size) + ") x --moe-upcycling-granularity (" +
                  std::to_string(dense_ffn_ / config_.ffn_hidden_size) +
                  ") hidden units, as Megatron builds the dense model");
    std::vector<float> values(static_cast<std::size_t>(shape[0] * shape[1]));
    reader_.read_whole(path, ckpt::TensorDType::Float32, shape, std::as_writable_bytes(std::span<float>(values)));
    return values;
  }

  const ckpt::ShardedCheckpoint& reader_;
  const GptConfig& config_;
  std::int64_t dense_ffn_;
  DenseMlp cached_;
};

// Every stored weight must be the dense model's: one of this model's outside the MoE layers' MLPs,
// or an MoE layer's dense MLP weight.
void check_dense_tensors(const ckpt::ShardedCheckpoint& reader, const GptConfig& config) {
  std::set<std::string> expected;
  for (const ParameterEntry& e : gpt_parameter_table(config).entries) expected.insert(ckpt::model_tensor_path(e.name));
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer)
    if (config.moe.is_moe_layer(layer))
      for (const char* weight : {".mlp.linear_fc1.weight", ".mlp.linear_fc2.weight"})
        expected.insert(ckpt::model_tensor_path(layer_prefix(layer) + weight));
  const std::string where = "checkpoint " + reader.directory();
  for (const std::string& name : reader.tensor_names(ckpt::kModelGroup)) {
    if (name.find(".mlp.router.") != std::string::npos || name.find(kRoutedExperts) != std::string::npos)
      throw Error(where + " holds an MoE model (tensor '" + name +
                  "'); --moe-use-upcycling converts the checkpoint of a dense model");
    if (!expected.count(name))
      throw Error(where + ": checkpoint tensor '" + name +
                  "' is not a parameter of the dense model upcycled into this one");
  }
}

}  // namespace

std::optional<UpcycledCheckpoint> load_upcycled_checkpoint(const std::string& load_dir,
                                                           const TrainCheckpointParts& parts,
                                                           std::int64_t granularity, bool finetune,
                                                           std::optional<std::int64_t> ckpt_step) {
  const std::optional<std::string> directory = checkpoint_to_resume(load_dir, ckpt_step);
  if (!directory) return std::nullopt;
  GptParameters& params = parts.params;
  const GptConfig& config = params.config();
  const TensorParallelRank& tp = params.tensor_parallel();
  const ckpt::ShardedCheckpoint reader(*directory);
  check_attention_heads(reader, config);
  check_dense_tensors(reader, config);

  const std::int64_t dense_ffn = config.ffn_hidden_size * granularity;
  const UpcyclingPlan plan = plan_upcycling(dense_ffn, config.moe.ffn_hidden_size, config.moe.num_experts,
                                            config.moe.topk, config.moe.pre_softmax, config.gated_linear_unit());
  DenseCheckpointReader dense(reader, config, dense_ffn);
  std::vector<float> whole, host;
  for (const ParameterEntry& e : params.entries()) {
    if (const std::optional<RoutedExpertWeight> w = routed_expert_weight(e.name)) {
      const DenseMlp& mlp = dense.mlp(w->mlp);
      whole = w->fc1 ? upcycled_fc1(mlp.fc1, config.hidden_size, dense_ffn, config.gated_linear_unit(), w->expert, plan)
                     : upcycled_fc2(mlp.fc2, config.hidden_size, dense_ffn, w->expert, plan);
      const TensorParallelRank& part = e.partition(tp);
      host = part.size == 1 ? whole : shard_tensor(e, part, whole);
    } else if (e.name.ends_with(".mlp.router.weight")) {
      // Not partitioned: every rank holds the whole freshly initialised router.
      host = upcycled_router(params.read_param(e), config.moe.num_experts, config.hidden_size, plan.granularity);
    } else if (e.name.find(".mlp.shared_experts.") != std::string::npos) {
      continue;  // freshly initialised, as Megatron leaves them
    } else {
      try {
        read_parameter_part(reader, ckpt::model_tensor_path(e.name), e, tp, whole, host);
      } catch (const Error& error) {
        throw Error(std::string(error.what()) + " (--moe-use-upcycling loads the dense model's weights outside the "
                                                "MoE layers' MLPs as they are)");
      }
    }
    params.write_param(e, host);
  }

  TrainingProgress& progress = parts.progress;
  progress.hf_architecture_json.clear();  // no longer the imported architecture
  if (!finetune) {
    const ckpt::CheckpointMetadata& meta = reader.metadata();
    progress.consumed_train_samples = meta.consumed_train_samples;
    progress.consumed_valid_samples = meta.consumed_valid_samples;
    progress.num_floating_point_operations_so_far = meta.num_floating_point_operations_so_far;
  }
  return UpcycledCheckpoint{*directory, plan};
}

}  // namespace mgt
