#include "train/train_checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/expert_bias_records.hpp"
#include "ckpt/hf_architecture_record.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/parameter_piece_record.hpp"
#include "ckpt/shard_file_snapshot.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/json_text.hpp"
#include "core/log.hpp"
#include "core/message_text.hpp"
#include "dist/local_communicator.hpp"
#include "train/checkpoint_parameter_read.hpp"
#include "train/rank_agreement.hpp"
#include "train/scheduler_state_json.hpp"

namespace mgt {

namespace {

constexpr const char* kDropoutState = "dropout_state";
constexpr const char* kOptimizerKey = "optimizer";
// In the optimizer scalars: where the fp32 master weights are. "model": the model's weights are
// fp32 and are the master copy, so optimizer/fp32_master_params is not stored (it would repeat
// them byte for byte). Absent (older checkpoints): the master copy is stored on its own.
constexpr const char* kMasterParamsKey = "fp32_master_params";
constexpr const char* kMasterInModel = "model";

// A dynamic loss scaler's state (loss_scaler.hpp); Megatron keeps it in the optimizer's state
// dict under the same name, so it is saved and loaded with the optimizer state.
constexpr const char* kGradScalerKey = "grad_scaler";

constexpr const char* kParallelLayoutKey = "parallel_layout";
// The samples of the iterations --iterations-to-skip skipped (Megatron's skipped_train_samples);
// stored when there are any.
constexpr const char* kSkippedTrainSamplesKey = "skipped_train_samples";
constexpr const char* kShardKey = "shard";

std::int64_t stored_sample_count(const std::string& text, const std::string& what) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw Error(what + " holds " + quoted_for_message(text) + ", expected a number of samples");
  return value;
}

std::string optimizer_scalars_json(const AdamWOptimizer& optimizer) {
  const AdamWSettings& s = optimizer.settings();
  return "{\"step\": " + std::to_string(optimizer.steps()) + ", \"beta1\": " + python_float_repr(s.beta1) +
         ", \"beta2\": " + python_float_repr(s.beta2) + ", \"eps\": " + python_float_repr(s.eps) +
         ", \"clip_grad\": " + python_float_repr(s.clip_grad) + ", \"" + kMasterParamsKey + "\": \"" +
         kMasterInModel + "\"}";
}

// Megatron's MixedPrecisionOptimizer.load_state_dict: a checkpoint without the scaler's state
// (an older one, or a bf16 or fp32 run's) leaves the scaler at its initial scale, and the state
// of a run that had one is not for a run without.
void load_loss_scaler(const ckpt::CheckpointMetadata& meta, LossScaler* scaler, const std::string& where) {
  const auto stored = meta.extra_json.find(kGradScalerKey);
  if (!scaler || !scaler->dynamic()) {
    if (stored != meta.extra_json.end())
      log::warn(where + " holds a dynamic loss scale, which this run does not use: not loaded");
    return;
  }
  if (stored == meta.extra_json.end()) {
    log::warn(where + " holds no loss scale: the dynamic loss scale starts at --initial-loss-scale");
    return;
  }
  scaler->load_state(parse_loss_scaler_state_json(stored->second, where + ": grad_scaler"));
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

// Every rank of one save writes into the same staging directory: rank 0 draws its name and
// tells the others.
std::string agreed_staging_token(dist::Communicator& world) {
  std::int64_t token = 0;
  if (world.rank() == 0) {
    std::random_device random;
    token = static_cast<std::int64_t>((std::uint64_t{random()} << 32) ^ random()) & 0x7fffffffffffffff;
  }
  world.broadcast(std::span<std::int64_t>(&token, 1), 0);
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(token));
  return text;
}

ckpt::CheckpointMetadata shard_metadata(const TrainCheckpointParts& parts, const TrainCheckpointSaveSettings& settings,
                                        const ckpt::WorldLayout& layout) {
  const TrainingProgress& progress = parts.progress;
  ckpt::CheckpointMetadata meta;
  meta.iteration = progress.iteration;
  meta.consumed_train_samples = progress.consumed_train_samples;
  meta.consumed_valid_samples = progress.consumed_valid_samples;
  meta.num_floating_point_operations_so_far = progress.num_floating_point_operations_so_far;
  meta.args_json = settings.args_json;
  meta.tokenizer_json = settings.tokenizer_json;
  meta.scheduler_json = scheduler_state_json(parts.scheduler.state());
  if (settings.save_optimizer) meta.extra_json[kOptimizerKey] = optimizer_scalars_json(parts.optimizer);
  if (settings.save_optimizer && parts.loss_scaler && parts.loss_scaler->dynamic())
    meta.extra_json[kGradScalerKey] = loss_scaler_state_json(parts.loss_scaler->state());
  meta.extra_json[kParallelLayoutKey] = settings.parallel_layout_json;
  if (!progress.hf_architecture_json.empty()) meta.extra_json[kHfArchitectureKey] = progress.hf_architecture_json;
  if (progress.skipped_train_samples > 0)
    meta.extra_json[kSkippedTrainSamplesKey] = std::to_string(progress.skipped_train_samples);
  // The pipeline layer offset of this shard: its layers keep their global numbers in the tensor
  // names, this says which ones the stage held.
  const PipelineStage& stage = parts.params.pipeline_stage();
  const std::int64_t total_layers = parts.params.config().num_layers;
  std::string shard = "{\"first_layer\": " + std::to_string(stage.first_layer) + ", \"num_layers\": " +
                      std::to_string(stage.layers_of(total_layers));
  if (stage.interleaved()) {
    // An interleaved stage's chunks are not consecutive: the layers it held, by global number.
    shard += ", \"virtual_stages\": " + std::to_string(stage.virtual_size) + ", \"layers\": [";
    for (std::int64_t l = 0; l < stage.layers_of(total_layers); ++l)
      shard += (l == 0 ? "" : ", ") + std::to_string(stage.layer_at(l, total_layers));
    shard += "]";
  }
  meta.extra_json[kShardKey] = shard + "}";
  meta.world = layout;
  return meta;
}

// FP8 state records of one linear layer.
std::string fp8_state_path(const std::string& layer, const char* field) { return "fp8/" + layer + "/" + field; }

// `experts_only`: the routed experts' layers alone (a rank that stores its experts, not the
// dense layers: see emit_train_checkpoint), under their global names as their weights.
void emit_fp8_state(ckpt::ShardFileSink& out, Fp8Training& fp8, bool experts_only = false) {
  if (fp8.recipe().current_scaling) return;  // each cast computes its own scale: nothing to keep
  const std::vector<Fp8Training::LinearState> state = fp8.read_state();
  const std::int64_t len = fp8.recipe().amax_history_len;
  for (std::int64_t k = 0; k < fp8.linears(); ++k) {
    if (experts_only && !fp8.expert_linear(k)) continue;
    const Fp8Training::LinearState& s = state[static_cast<size_t>(k)];
    const std::string& layer = fp8.linear_name(k);
    auto put = [&](const char* field, std::vector<std::int64_t> shape, const std::vector<float>& values) {
      out.tensor({ckpt::TensorRecord::whole(fp8_state_path(layer, field), ckpt::TensorDType::Float32,
                                            std::move(shape)),
                  ckpt::HostBytes(values)});
    };
    put("forward_amax_history", {len, 2}, s.forward_history);
    put("forward_scale", {2}, s.forward_scale);
    put("backward_amax_history", {len}, s.backward_history);
    put("backward_scale", {1}, s.backward_scale);
  }
}

// The FP8 state of the layers the checkpoint has it for; a layer without (a checkpoint of a
// bf16 run) starts from Transformer Engine's initial state. Histories of another length than
// --fp8-amax-history-len are left out (the scales are kept), with a note.
void load_fp8_state(const ckpt::ShardedCheckpoint& reader, Fp8Training& fp8, const std::string& where) {
  if (fp8.recipe().current_scaling) return;
  std::vector<Fp8Training::LinearState> state(static_cast<size_t>(fp8.linears()));
  const std::int64_t len = fp8.recipe().amax_history_len;
  std::int64_t missing = 0;
  std::int64_t other_length = 0;
  for (std::int64_t k = 0; k < fp8.linears(); ++k) {
    const std::string& layer = fp8.linear_name(k);
    Fp8Training::LinearState& s = state[static_cast<size_t>(k)];
    auto get = [&](const char* field, std::vector<std::int64_t> shape, std::vector<float>& values) {
      std::int64_t n = 1;
      for (const std::int64_t d : shape) n *= d;
      values.assign(static_cast<size_t>(n), 0.0f);
      reader.read_whole(fp8_state_path(layer, field), ckpt::TensorDType::Float32, shape,
                        std::as_writable_bytes(std::span<float>(values)));
    };
    if (!reader.contains(fp8_state_path(layer, "forward_scale"))) {
      ++missing;
      continue;
    }
    get("forward_scale", {2}, s.forward_scale);
    get("backward_scale", {1}, s.backward_scale);
    if (reader.global_shape(fp8_state_path(layer, "backward_amax_history")) != std::vector<std::int64_t>{len}) {
      ++other_length;
      continue;
    }
    get("forward_amax_history", {len, 2}, s.forward_history);
    get("backward_amax_history", {len}, s.backward_history);
  }
  fp8.write_state(state);
  if (missing > 0)
    log::info(where + " holds no FP8 state for " + std::to_string(missing) + " FP8 linear layers: their scales start at 1");
  if (other_length > 0)
    log::info(where + ": the FP8 amax histories of " + std::to_string(other_length) + " linear layers have another "
              "length than --fp8-amax-history-len; their scales are loaded, their histories start empty");
}

}  // namespace

// This rank's files, with no communication: data-parallel rank 0 of each model-parallel rank
// holds its pieces of the weights (and of the optimizer state when that is replicated over
// data-parallel ranks), and with the distributed optimizer every data-parallel rank holds the
// optimizer state it owns, as Megatron's distrib_optim.pt files hold each rank's shard
// (megatron/core/optimizer/distrib_optimizer.py). Under expert parallelism (or with the experts
// split over expert-tensor-parallel ranks of their own) the experts of a rank that is not
// data-parallel rank 0 are stored by rank 0 of its expert-data-parallel group, in its
// data-parallel shard file, under their global names (split as their expert-tensor-parallel
// ranks hold them): the files together hold each expert at least once.
// Each tensor is copied off the device once and handed to the sink as it is taken.
void emit_train_checkpoint(const TrainCheckpointParts& parts, const TrainCheckpointSaveSettings& settings,
                           const ckpt::WorldLayout& layout, ckpt::ShardFileSink& sink) {
  const GptParameters& params = parts.params;
  const TensorParallelRank& tp = params.tensor_parallel();
  const ckpt::CheckpointMetadata meta = shard_metadata(parts, settings, layout);
  const bool optimizer_shards =
      settings.save_optimizer && parts.optimizer.distributed() && layout.data_parallel_size > 1;
  using ckpt::OptimizerState;

  if (layout.data_parallel_rank == 0) {
    sink.begin_file(ckpt::shard_file_name(ckpt::ShardId::model_shard(layout)), meta);
    auto put = [&](const std::string& path, const ParameterEntry& e, std::vector<float> values) {
      sink.tensor({ckpt::parameter_piece_record(path, e, tp), ckpt::HostBytes(std::move(values))});
    };
    // The last stage's copy of a tied word embedding is the first stage's tensor: stored once.
    for (const ParameterEntry& e : params.entries())
      if (!e.pipeline_duplicate) put(ckpt::model_tensor_path(e.name), e, params.read_param(e));
    // The weights are fp32 and are the master copy: no optimizer/fp32_master_params (see
    // kMasterParamsKey). A backend with lower-precision weights would write its master copy here.
    if (settings.save_optimizer && !optimizer_shards)
      for (const ParameterEntry& e : params.entries()) {
        if (e.pipeline_duplicate) continue;
        put(ckpt::optimizer_tensor_path(OptimizerState::ExpAvg, e.name), e, parts.optimizer.read_exp_avg(e));
        put(ckpt::optimizer_tensor_path(OptimizerState::ExpAvgSq, e.name), e, parts.optimizer.read_exp_avg_sq(e));
      }
    if (parts.fp8) emit_fp8_state(sink, *parts.fp8);
    ckpt::emit_expert_bias(sink, params.moe_expert_bias());
    if (settings.save_rng) {
      std::vector<std::int64_t> dropout = {static_cast<std::int64_t>(parts.progress.dropout_seed),
                                           parts.progress.micro_steps};
      sink.tensor({ckpt::TensorRecord::whole(ckpt::rng_state_path(kDropoutState), ckpt::TensorDType::Int64, {2}),
                   ckpt::HostBytes(std::move(dropout))});
    }
  }
  const bool expert_weights = settings.writes_experts && layout.data_parallel_rank != 0;
  if (optimizer_shards || settings.expert_parallel) {
    sink.begin_file(ckpt::shard_file_name(ckpt::ShardId::data_parallel_shard(layout)), meta);
    // The FP8 state of the experts stored here goes with them.
    if (expert_weights && parts.fp8) emit_fp8_state(sink, *parts.fp8, /*experts_only=*/true);
    if (expert_weights)
      for (const ParameterEntry& e : params.entries()) {
        if (!e.expert_parallel) continue;
        auto put = [&](const std::string& path, std::vector<float> values) {
          sink.tensor({ckpt::parameter_piece_record(path, e, tp), ckpt::HostBytes(std::move(values))});
        };
        put(ckpt::model_tensor_path(e.name), params.read_param(e));
        if (settings.save_optimizer && !optimizer_shards) {
          put(ckpt::optimizer_tensor_path(OptimizerState::ExpAvg, e.name), parts.optimizer.read_exp_avg(e));
          put(ckpt::optimizer_tensor_path(OptimizerState::ExpAvgSq, e.name), parts.optimizer.read_exp_avg_sq(e));
        }
      }
    for (const ParameterEntry& e : params.entries()) {
      if (!optimizer_shards) break;
      const BufferShard part = parts.optimizer.owned_part(e);
      if (e.pipeline_duplicate || part.size() == 0) continue;
      const std::int64_t offset = part.begin - e.offset;
      sink.tensor({ckpt::parameter_range_record(ckpt::optimizer_tensor_path(OptimizerState::ExpAvg, e.name), e, tp,
                                                offset, part.size()),
                   ckpt::HostBytes(parts.optimizer.read_owned_exp_avg(e))});
      sink.tensor({ckpt::parameter_range_record(ckpt::optimizer_tensor_path(OptimizerState::ExpAvgSq, e.name), e, tp,
                                                offset, part.size()),
                   ckpt::HostBytes(parts.optimizer.read_owned_exp_avg_sq(e))});
    }
  }
}

std::vector<ckpt::ShardFileSnapshot> snapshot_train_checkpoint(const TrainCheckpointParts& parts,
                                                               const TrainCheckpointSaveSettings& settings,
                                                               const ckpt::WorldLayout& layout) {
  ckpt::ShardSnapshotCollector collector;
  emit_train_checkpoint(parts, settings, layout, collector);
  return collector.take();
}

namespace {

// What still stands after a failed save, for its message.
std::string previous_checkpoint_note(const std::string& save_dir) {
  try {
    if (auto latest = ckpt::latest_iteration(save_dir))
      return "the last checkpoint (iteration " + std::to_string(*latest) + " in " + save_dir + ") is intact";
    return save_dir + " holds no earlier checkpoint";
  } catch (const Error&) {
    return "the earlier checkpoints in " + save_dir + " are as they were";
  }
}

}  // namespace

CollectiveSave::CollectiveSave(std::string save_dir, std::int64_t iteration, dist::Communicator& world)
    : save_dir_(std::move(save_dir)), iteration_(iteration), world_(world) {
  ckpt::SaveOptions options;
  options.staging_token = agreed_staging_token(world_);
  staging_dir_ = ckpt::staging_directory(save_dir_, iteration_, options.staging_token);
  // Rank 0 holds the writer lock: it alone prepares and publishes; every rank writes its own
  // files in between, and a failure on any rank abandons the whole save.
  run("preparing the checkpoint", [&] {
    if (world_.rank() == 0) ckpt::prepare_staging_directory(save_dir_, iteration_, options);
  });
  prepared_ = true;
}

CollectiveSave::~CollectiveSave() {
  if (published_ || !prepared_ || world_.rank() != 0) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_dir_, ec);  // best effort; the next save cleans up anyway
}

std::string CollectiveSave::directory() const { return ckpt::iteration_directory(save_dir_, iteration_); }

void CollectiveSave::run(const char* what, const std::function<void()>& step) {
  try {
    run_on_all_ranks_or_none(world_, what, step);
  } catch (const Error& e) {
    const std::string message = "checkpoint of iteration " + std::to_string(iteration_) + " not saved: " + e.what() +
                                "; " + previous_checkpoint_note(save_dir_);
    if (dynamic_cast<const FailedOnSomeRank*>(&e)) throw FailedOnSomeRank(message, e.exit_code());
    throw Error(message, e.exit_code());
  }
}

void CollectiveSave::publish() {
  run("publishing the checkpoint", [&] {
    if (world_.rank() == 0) ckpt::publish_iteration(save_dir_, iteration_, staging_dir_);
  });
  published_ = true;
}

std::vector<RankSaveStatistics> gather_save_statistics(dist::Communicator& world, const RankSaveStatistics& mine) {
  // Each rank fills its own slot; the sum of the slots is every rank's figures.
  constexpr std::size_t kFields = 3;
  std::vector<double> slots(static_cast<std::size_t>(world.size()) * kFields, 0.0);
  double* own = slots.data() + static_cast<std::size_t>(world.rank()) * kFields;
  own[0] = static_cast<double>(mine.bytes);
  own[1] = mine.copy_seconds;
  own[2] = mine.write_seconds;
  if (world.size() > 1) world.all_reduce(std::span<double>(slots), dist::ReduceOp::Sum);
  std::vector<RankSaveStatistics> all(static_cast<std::size_t>(world.size()));
  for (std::size_t r = 0; r < all.size(); ++r)
    all[r] = {static_cast<std::uint64_t>(slots[r * kFields]), slots[r * kFields + 1], slots[r * kFields + 2]};
  return all;
}

SavedTrainCheckpoint save_train_checkpoint(const std::string& save_dir, const TrainCheckpointParts& parts,
                                           const TrainCheckpointSaveSettings& settings, dist::Communicator& world,
                                           const ckpt::WorldLayout& layout) {
  CollectiveSave save(save_dir, parts.progress.iteration, world);
  RankSaveStatistics mine;
  save.run("writing the checkpoint shards", [&] {
    // One tensor in host memory at a time: each is written as soon as it is taken, the time
    // spent taking them (the copies off the device) counted apart.
    struct TimedWriter final : ckpt::ShardFileSink {
      ckpt::ShardFilesWriter files;
      std::chrono::steady_clock::duration writing{};
      explicit TimedWriter(const std::string& dir) : files(dir) {}
      void begin_file(const std::string& name, const ckpt::CheckpointMetadata& metadata) override {
        const auto start = std::chrono::steady_clock::now();
        files.begin_file(name, metadata);
        writing += std::chrono::steady_clock::now() - start;
      }
      void tensor(ckpt::SnapshotTensor tensor) override {
        const auto start = std::chrono::steady_clock::now();
        files.tensor(std::move(tensor));
        writing += std::chrono::steady_clock::now() - start;
      }
    } writer(save.staging_dir());
    const auto start = std::chrono::steady_clock::now();
    emit_train_checkpoint(parts, settings, layout, writer);
    const auto finishing = std::chrono::steady_clock::now();
    mine.bytes = writer.files.finish();
    const auto end = std::chrono::steady_clock::now();
    writer.writing += end - finishing;
    mine.write_seconds = std::chrono::duration<double>(writer.writing).count();
    mine.copy_seconds = std::chrono::duration<double>(end - start - writer.writing).count();
  });
  save.publish();
  return {save.directory(), gather_save_statistics(world, mine)};
}

SavedTrainCheckpoint save_train_checkpoint(const std::string& save_dir, const TrainCheckpointParts& parts,
                                           const TrainCheckpointSaveSettings& settings) {
  dist::LocalCommunicator alone{"world", 0, nullptr, nullptr};
  return save_train_checkpoint(save_dir, parts, settings, alone, ckpt::WorldLayout{});
}

namespace {

// The model sizes whose difference explains a shape mismatch, as flags where there is one.
// The kinds of layer the checkpoint's arguments and this run disagree on, as flags: these come
// first, since a size that differs (the FFN's under --swiglu) is often their consequence.
std::string layer_kind_hint(const ckpt::CheckpointMetadata& meta, const GptConfig& config) {
  GptConfig saved;
  try {
    saved = gpt_config_from_args_json(meta.args_json, "the checkpoint's arguments");
  } catch (const Error&) {
    return {};  // incomplete arguments: the sizes' hint alone
  }
  const GptConfig ours = config.resolved();
  std::string hint;
  auto add = [&](const std::string& text) { hint += (hint.empty() ? "" : ", ") + text; };
  if (saved.normalization != ours.normalization)
    add("--normalization " + std::string(to_string(saved.normalization)) + " (this run: " +
        std::string(to_string(ours.normalization)) + ")");
  if (saved.position_embedding_type != ours.position_embedding_type)
    add("--position-embedding-type " + std::string(to_string(saved.position_embedding_type)) + " (this run: " +
        std::string(to_string(ours.position_embedding_type)) + ")");
  const bool saved_swiglu = saved.activation == Activation::kSwiglu;
  if (saved_swiglu != (ours.activation == Activation::kSwiglu))
    add(saved_swiglu ? "--swiglu (this run: without it)" : "no --swiglu (this run: --swiglu)");
  if (saved.add_bias_linear != ours.add_bias_linear)
    add(saved.add_bias_linear ? "biases (this run: --disable-bias-linear)" : "--disable-bias-linear (this run: biases)");
  if (saved.qk_layernorm != ours.qk_layernorm)
    add(saved.qk_layernorm ? "--qk-layernorm (this run: without it)" : "no --qk-layernorm (this run: --qk-layernorm)");
  return hint;
}

std::string shape_hint(const ckpt::CheckpointMetadata& meta, const GptConfig& config) {
  std::string hint = layer_kind_hint(meta, config);
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

// The checkpoint a run resuming from load_dir would read, without a word: nullopt when there is
// none.
std::optional<std::string> quiet_checkpoint_to_resume(const std::string& load_dir,
                                                      std::optional<std::int64_t> ckpt_step) {
  const std::optional<ckpt::CheckpointToResume> found = ckpt::find_checkpoint_to_load(load_dir, ckpt_step);
  if (!found) return std::nullopt;
  return found->directory;
}

}  // namespace

std::optional<std::int64_t> checkpoint_padded_vocab_size(const std::string& load_dir,
                                                         std::optional<std::int64_t> ckpt_step) {
  try {
    const std::optional<std::string> directory = quiet_checkpoint_to_resume(load_dir, ckpt_step);
    if (!directory) return std::nullopt;
    const std::vector<std::string> shards = ckpt::list_shard_files(*directory);
    if (shards.empty()) return std::nullopt;
    ckpt::ShardReader reader(shards.front());
    JsonScalars args(reader.metadata().args_json, "the checkpoint's arguments");
    if (!args.contains("padded_vocab_size")) return std::nullopt;
    return args.integer("padded_vocab_size");
  } catch (const Error&) {
    return std::nullopt;  // loading it says what is wrong
  }
}

std::optional<std::string> load_train_checkpoint(const std::string& load_dir, const TrainCheckpointParts& parts,
                                                 const TrainCheckpointLoadSettings& settings) {
  const std::optional<std::string> directory = checkpoint_to_resume(load_dir, settings.ckpt_step);
  if (!directory) return std::nullopt;
  GptParameters& params = parts.params;
  const TensorParallelRank& tp = params.tensor_parallel();
  // Whatever layout wrote it: each tensor is assembled from the stored pieces and this rank keeps
  // its own part, so the tensor-, pipeline- and data-parallel sizes may change between runs.
  const ckpt::ShardedCheckpoint reader(*directory);
  const ckpt::CheckpointMetadata& meta = reader.metadata();
  const std::string where = "checkpoint " + *directory;
  check_attention_heads(reader, params.config());

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
      read_parameter_part(reader, path, e, tp, whole, host);
    } catch (const Error& error) {
      throw Error(std::string(error.what()) + shape_hint(meta, params.config()));
    }
  };
  for (const ParameterEntry& e : params.entries()) {
    load(ckpt::model_tensor_path(e.name), e);
    params.write_param(e, host);
  }

  // A release checkpoint is weights (Megatron's load_checkpoint: `not release and not
  // args.finetune` guards the optimizer and the random state), and its run starts at iteration 0.
  const bool release = ckpt::is_release_directory(*directory);
  const bool with_optimizer = settings.load_optimizer && !settings.finetune && !release;
  const bool with_rng = settings.load_rng && !settings.finetune && !release;
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
    load_loss_scaler(meta, parts.loss_scaler, where);
    parts.scheduler.load_state(parse_scheduler_state_json(meta.scheduler_json, where + ": scheduler state"),
                               settings.scheduler_resume);
  }

  if (parts.fp8 && !settings.finetune && !release) load_fp8_state(reader, *parts.fp8, where);
  // Part of the model's state (Megatron's expert_bias is a persistent buffer): loaded with the
  // weights, --finetune included.
  ckpt::load_expert_bias(reader, params.moe_expert_bias(), where);

  TrainingProgress& progress = parts.progress;
  const auto hf_architecture = meta.extra_json.find(kHfArchitectureKey);
  progress.hf_architecture_json = hf_architecture == meta.extra_json.end() ? "" : hf_architecture->second;
  // As Megatron: the iteration is 0 for --finetune and a release checkpoint, the consumed samples
  // are the checkpoint's unless --finetune, and the floating-point operations so far are the
  // checkpoint's in every case.
  if (!settings.finetune && !release) progress.iteration = meta.iteration;
  if (!settings.finetune) {
    progress.consumed_train_samples = meta.consumed_train_samples;
    progress.consumed_valid_samples = meta.consumed_valid_samples;
    const auto skipped = meta.extra_json.find(kSkippedTrainSamplesKey);
    progress.skipped_train_samples =
        skipped == meta.extra_json.end() ? 0 : stored_sample_count(skipped->second, where + ": extra/" + kSkippedTrainSamplesKey);
  }
  progress.num_floating_point_operations_so_far = meta.num_floating_point_operations_so_far;
  if (with_rng) {
    const std::string path = ckpt::rng_state_path(kDropoutState);
    if (!reader.contains(path))
      throw Error(where + " holds no random state (saved with --no-save-rng?); pass --no-load-rng or --finetune");
    std::vector<std::int64_t> dropout(2);
    const std::int64_t shape[] = {2};
    reader.read_whole(path, ckpt::TensorDType::Int64, shape, std::as_writable_bytes(std::span<std::int64_t>(dropout)));
    progress.dropout_seed = static_cast<std::uint64_t>(dropout[0]);
    progress.micro_steps = dropout[1];
  }
  return directory;
}

}  // namespace mgt
