#include "train/train_checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <vector>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/log.hpp"
#include "model/parameter_sharding.hpp"
#include "train/checkpoint_json.hpp"

namespace mgt {

namespace {

constexpr const char* kDropoutState = "dropout_state";
constexpr const char* kOptimizerKey = "optimizer";
// In the optimizer scalars: where the fp32 master weights are. "model": the model's weights are
// fp32 and are the master copy, so optimizer/fp32_master_params is not stored (it would repeat
// them byte for byte). Absent (older checkpoints): the master copy is stored on its own.
constexpr const char* kMasterParamsKey = "fp32_master_params";
constexpr const char* kMasterInModel = "model";

constexpr const char* kParallelLayoutKey = "parallel_layout";
// What every checkpoint stores: the single-rank tensors in one shard file.
const ckpt::WorldLayout kStoredLayout{};
const TensorParallelRank kWholeTensors{1, 0};

// One parameter (or optimizer state of it) as stored: local shape, global shape and the
// tensor-parallel split recorded so that a converter can reshard without knowing the model.
ckpt::TensorRecord tensor_record(std::string path, const ParameterEntry& e, const TensorParallelRank& tp) {
  if (e.partition_dim == kNotPartitioned)
    return ckpt::TensorRecord::whole(std::move(path), ckpt::TensorDType::Float32, e.local_shape);
  return ckpt::TensorRecord::partitioned(std::move(path), ckpt::TensorDType::Float32, e.local_shape,
                                         static_cast<int>(e.partition_dim), static_cast<int>(tp.rank),
                                         static_cast<int>(tp.size));
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }

std::string optimizer_scalars_json(const AdamWOptimizer& optimizer) {
  const AdamWSettings& s = optimizer.settings();
  return "{\"step\": " + std::to_string(optimizer.steps()) + ", \"beta1\": " + python_float_repr(s.beta1) +
         ", \"beta2\": " + python_float_repr(s.beta2) + ", \"eps\": " + python_float_repr(s.eps) +
         ", \"clip_grad\": " + python_float_repr(s.clip_grad) + ", \"" + kMasterParamsKey + "\": \"" +
         kMasterInModel + "\"}";
}

}  // namespace

ckpt::SaveDirectoryLock open_save_directory(const std::string& save_dir) {
  ckpt::SaveDirectoryLock lock(save_dir);
  ckpt::clean_interrupted_saves(save_dir);
  return lock;
}

void require_planned_saves_new(const std::string& save_dir, std::int64_t start_iteration,
                               std::int64_t last_iteration, std::int64_t save_interval) {
  for (std::int64_t iteration : ckpt::list_iteration_directories(save_dir)) {
    if (iteration <= start_iteration || iteration > last_iteration) continue;
    if (iteration % save_interval != 0 && iteration != last_iteration) continue;
    throw Error("--save " + save_dir + " already holds " + ckpt::iteration_directory_name(iteration) +
                ", which this run (starting at iteration " + std::to_string(start_iteration) +
                ") would save again; committed checkpoints are never replaced: resume from the newest with --load " +
                save_dir + ", move it away, or choose another --save");
  }
}

namespace {

std::string write_train_checkpoint(const std::string& save_dir, const TrainCheckpointParts& parts,
                                   const TrainCheckpointSaveSettings& settings) {
  const GptParameters& params = parts.params;
  const TrainingProgress& progress = parts.progress;
  const WholeTrainState* whole = settings.whole;
  if ((params.tensor_parallel().size > 1 || !params.pipeline_stage().whole_model()) && !whole)
    throw Error("internal error: a tensor-parallel rank's shards or a pipeline stage's tensors are not a checkpoint; "
                "gather them whole first");
  if (whole && settings.save_optimizer && whole->exp_avg.empty() && !whole->table.entries.empty())
    throw Error("internal error: the optimizer state was not gathered for the checkpoint");

  ckpt::CheckpointMetadata meta;
  meta.iteration = progress.iteration;
  meta.consumed_train_samples = progress.consumed_train_samples;
  meta.consumed_valid_samples = progress.consumed_valid_samples;
  meta.num_floating_point_operations_so_far = progress.num_floating_point_operations_so_far;
  meta.args_json = settings.args_json;
  meta.tokenizer_json = settings.tokenizer_json;
  meta.scheduler_json = scheduler_state_json(parts.scheduler.state());
  if (settings.save_optimizer) meta.extra_json[kOptimizerKey] = optimizer_scalars_json(parts.optimizer);
  meta.extra_json[kParallelLayoutKey] = settings.parallel_layout_json;
  meta.world = kStoredLayout;

  ckpt::IterationSave save(save_dir, progress.iteration);
  ckpt::ShardWriter writer(save.staged_path(ckpt::shard_file_name(ckpt::ShardId::model_shard(meta.world))), meta);
  // Whole tensors: the gathered ones, or this single rank's own.
  const ParameterTable& table = whole ? whole->table : params.table();
  auto write = [&](const std::string& path, const ParameterEntry& e, const std::vector<float>& values) {
    writer.write(tensor_record(path, e, kWholeTensors), bytes_of(values));
  };
  for (const ParameterEntry& e : table.entries) {
    const std::string path = ckpt::model_tensor_path(e.name);
    if (whole) write(path, e, whole->weights.at(e.name));
    else write(path, e, params.read_param(e));
  }
  if (settings.save_optimizer) {
    using ckpt::OptimizerState;
    // The weights are fp32 and are the master copy: no optimizer/fp32_master_params (see
    // kMasterParamsKey). A backend with lower-precision weights would write its master copy here.
    for (const ParameterEntry& e : table.entries) {
      const std::string avg = ckpt::optimizer_tensor_path(OptimizerState::ExpAvg, e.name);
      const std::string avg_sq = ckpt::optimizer_tensor_path(OptimizerState::ExpAvgSq, e.name);
      if (whole) {
        write(avg, e, whole->exp_avg.at(e.name));
        write(avg_sq, e, whole->exp_avg_sq.at(e.name));
      } else {
        write(avg, e, parts.optimizer.read_exp_avg(e));
        write(avg_sq, e, parts.optimizer.read_exp_avg_sq(e));
      }
    }
  }
  if (settings.save_rng) {
    const std::vector<std::int64_t> dropout = {static_cast<std::int64_t>(progress.dropout_seed),
                                               progress.micro_steps};
    writer.write(ckpt::TensorRecord::whole(ckpt::rng_state_path(kDropoutState), ckpt::TensorDType::Int64, {2}),
                 std::as_bytes(std::span<const std::int64_t>(dropout)));
  }
  writer.close();
  save.commit();
  return save.final_dir();
}

}  // namespace

std::string save_train_checkpoint(const std::string& save_dir, const TrainCheckpointParts& parts,
                                  const TrainCheckpointSaveSettings& settings) {
  try {
    return write_train_checkpoint(save_dir, parts, settings);
  } catch (const Error& e) {
    // The save left nothing behind (its staging directory is gone); say what still stands.
    std::string previous = save_dir + " holds no earlier checkpoint";
    try {
      if (auto latest = ckpt::latest_iteration(save_dir))
        previous = "the last checkpoint (iteration " + std::to_string(*latest) + " in " + save_dir + ") is intact";
    } catch (const Error&) {
      previous = "the earlier checkpoints in " + save_dir + " are as they were";
    }
    throw Error("checkpoint of iteration " + std::to_string(parts.progress.iteration) + " not saved: " + e.what() +
                "; " + previous, e.exit_code());
  }
}

namespace {

// The model sizes whose difference explains a shape mismatch, as flags where there is one.
std::string shape_hint(const ckpt::CheckpointMetadata& meta, const GptConfig& config) {
  std::string hint;
  try {
    JsonScalars args(meta.args_json, "the checkpoint's arguments");
    const std::pair<const char*, std::int64_t> sizes[] = {
        {"num_layers", config.num_layers},
        {"hidden_size", config.hidden_size},
        {"num_attention_heads", config.num_attention_heads},
        {"num_query_groups", config.query_groups()},
        {"kv_channels", config.kv_channels},
        {"ffn_hidden_size", config.ffn_hidden_size},
        {"max_position_embeddings", config.max_position_embeddings},
        {"padded_vocab_size", config.padded_vocab_size},
    };
    for (const auto& [key, ours] : sizes) {
      if (!args.contains(key) || args.show(key) == std::to_string(ours)) continue;
      std::string flag = std::string("--") + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (std::string(key) == "padded_vocab_size") flag = "padded vocabulary size";
      hint += std::string(hint.empty() ? "" : ", ") + flag + " " + args.show(key) + " (this run: " +
              std::to_string(ours) + ")";
    }
  } catch (const Error&) {
    return {};  // a checkpoint without readable arguments: the tensor message stands alone
  }
  return hint.empty() ? std::string() : "; the checkpoint was saved with " + hint;
}

// The checkpoint the tracker file names. Without a tracker file, the newest complete iteration
// directory, said in a log line: starting over instead would write this run's iterations over
// committed ones. nullopt when load_dir holds no iteration directory at all.
std::optional<std::string> checkpoint_to_resume(const std::string& load_dir) {
  if (auto directory = ckpt::find_latest_checkpoint_directory(load_dir)) return directory;
  const ckpt::NewestCompleteIteration found = ckpt::find_newest_complete_iteration(load_dir);
  std::string skipped;
  for (const ckpt::IterationCandidate& c : found.skipped)
    skipped += "; " + c.directory + " is not complete: " + c.problem;
  const std::string tracker(ckpt::kTrackerFileName);
  if (found.complete) {
    log::warn(load_dir + " has no " + tracker + ": resuming from " + found.complete->directory +
              ", its newest complete checkpoint (iteration " + std::to_string(found.complete->iteration) + ")" +
              skipped);
    return found.complete->directory;
  }
  if (found.skipped.empty()) return std::nullopt;
  throw Error(load_dir + " has no " + tracker + " and none of its " + std::to_string(found.skipped.size()) +
              " iteration directories is a complete checkpoint" + skipped +
              "; move them away to start over, or repair the tracker file");
}

// The stored whole tensor at `path`, then this rank's shard of it (a copy only under tensor
// parallelism); `whole` is scratch.
void read_floats(const ckpt::ShardReader& reader, const std::string& path, const ParameterEntry& e,
                 const TensorParallelRank& tp, std::vector<float>& whole, std::vector<float>& out) {
  std::vector<float>& target = tp.size == 1 ? out : whole;
  target.resize(static_cast<std::size_t>(e.global_numel()));
  reader.read(path, ckpt::TensorDType::Float32, e.global_shape, std::as_writable_bytes(std::span<float>(target)));
  if (tp.size > 1) out = shard_tensor(e, tp, whole);
}

// The checkpoint a run resuming from load_dir would read, without a word: nullopt when there is
// none.
std::optional<std::string> quiet_checkpoint_to_resume(const std::string& load_dir) {
  if (auto directory = ckpt::find_latest_checkpoint_directory(load_dir)) return directory;
  const ckpt::NewestCompleteIteration found = ckpt::find_newest_complete_iteration(load_dir);
  if (found.complete) return found.complete->directory;
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> checkpoint_padded_vocab_size(const std::string& load_dir) {
  try {
    const std::optional<std::string> directory = quiet_checkpoint_to_resume(load_dir);
    if (!directory) return std::nullopt;
    ckpt::ShardReader reader(*directory + "/" + ckpt::shard_file_name(ckpt::ShardId::model_shard(kStoredLayout)));
    JsonScalars args(reader.metadata().args_json, "the checkpoint's arguments");
    if (!args.contains("padded_vocab_size")) return std::nullopt;
    return args.integer("padded_vocab_size");
  } catch (const Error&) {
    return std::nullopt;  // loading it says what is wrong
  }
}

std::optional<std::string> load_train_checkpoint(const std::string& load_dir, const TrainCheckpointParts& parts,
                                                 const TrainCheckpointLoadSettings& settings) {
  const std::optional<std::string> directory = checkpoint_to_resume(load_dir);
  if (!directory) return std::nullopt;
  GptParameters& params = parts.params;
  const TensorParallelRank& tp = params.tensor_parallel();
  ckpt::ShardReader reader(*directory + "/" + ckpt::shard_file_name(ckpt::ShardId::model_shard(kStoredLayout)));
  const ckpt::CheckpointMetadata& meta = reader.metadata();
  const std::string where = "checkpoint " + *directory;
  if (meta.world.tensor_model_parallel_size != 1 || meta.world.pipeline_model_parallel_size != 1)
    throw Error(where + " is split over shard files (tensor-parallel size " +
                std::to_string(meta.world.tensor_model_parallel_size) + ", pipeline-parallel size " +
                std::to_string(meta.world.pipeline_model_parallel_size) +
                "); mgt-train reads checkpoints of whole tensors in one file, which it reshards itself "
                "(convert it to one shard first)");

  // Every stored weight must be one of the model's and every one of ours must be stored (a
  // pipeline stage reads its own part of the whole model's tensors).
  std::set<std::string> expected;
  for (const ParameterEntry& e : gpt_parameter_table(params.config()).entries)
    expected.insert(ckpt::model_tensor_path(e.name));
  for (const std::string& name : reader.tensor_names(ckpt::kModelGroup))
    if (!expected.count(name))
      throw Error(where + ": checkpoint tensor '" + name + "' is not a parameter of this model" +
                  shape_hint(meta, params.config()) +
                  (name == ckpt::model_tensor_path("output_layer.weight")
                       ? " (it was saved with --untie-embeddings-and-output-weights)"
                       : std::string()));

  std::vector<float> host;
  std::vector<float> whole;
  auto load = [&](const std::string& path, const ParameterEntry& e) {
    if (!reader.contains(path))
      throw Error(where + " has no tensor '" + path + "'" + shape_hint(meta, params.config()) +
                  (path == ckpt::model_tensor_path("output_layer.weight")
                       ? " (it was saved without --untie-embeddings-and-output-weights)"
                       : std::string()));
    try {
      read_floats(reader, path, e, tp, whole, host);
    } catch (const Error& error) {
      throw Error(std::string(error.what()) + shape_hint(meta, params.config()));
    }
  };
  for (const ParameterEntry& e : params.entries()) {
    load(ckpt::model_tensor_path(e.name), e);
    params.write_param(e, host);
  }

  const bool with_optimizer = settings.load_optimizer && !settings.finetune;
  const bool with_rng = settings.load_rng && !settings.finetune;
  if (with_optimizer) {
    auto scalars = meta.extra_json.find(kOptimizerKey);
    if (scalars == meta.extra_json.end())
      throw Error(where + " holds no optimizer state (saved with --no-save-optim?); pass --no-load-optim or "
                  "--finetune to load the weights only");
    const JsonScalars optimizer_scalars(scalars->second, where + ": optimizer state");
    const bool master_in_model = optimizer_scalars.contains(kMasterParamsKey) &&
                                 optimizer_scalars.text(kMasterParamsKey) == kMasterInModel;
    using ckpt::OptimizerState;
    for (const ParameterEntry& e : params.entries()) {
      // A stored fp32 master copy is the authoritative copy of the weights; without one the
      // weights loaded above are it.
      if (!master_in_model) {
        load(ckpt::optimizer_tensor_path(OptimizerState::MasterParam, e.name), e);
        params.write_param(e, host);
      }
      load(ckpt::optimizer_tensor_path(OptimizerState::ExpAvg, e.name), e);
      parts.optimizer.write_exp_avg(e, host);
      load(ckpt::optimizer_tensor_path(OptimizerState::ExpAvgSq, e.name), e);
      parts.optimizer.write_exp_avg_sq(e, host);
    }
    parts.optimizer.set_steps(optimizer_scalars.integer("step"));
    parts.scheduler.load_state(parse_scheduler_state_json(meta.scheduler_json, where + ": scheduler state"),
                               settings.scheduler_resume);
  }

  TrainingProgress& progress = parts.progress;
  if (!settings.finetune) {
    progress.iteration = meta.iteration;
    progress.consumed_train_samples = meta.consumed_train_samples;
    progress.consumed_valid_samples = meta.consumed_valid_samples;
    progress.num_floating_point_operations_so_far = meta.num_floating_point_operations_so_far;
  }
  if (with_rng) {
    const std::string path = ckpt::rng_state_path(kDropoutState);
    if (!reader.contains(path))
      throw Error(where + " holds no random state (saved with --no-save-rng?); pass --no-load-rng or --finetune");
    std::vector<std::int64_t> dropout(2);
    const std::int64_t shape[] = {2};
    reader.read(path, ckpt::TensorDType::Int64, shape, std::as_writable_bytes(std::span<std::int64_t>(dropout)));
    progress.dropout_seed = static_cast<std::uint64_t>(dropout[0]);
    progress.micro_steps = dropout[1];
  }
  return directory;
}

}  // namespace mgt
