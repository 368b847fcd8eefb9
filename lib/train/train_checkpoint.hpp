// A training run's state as an HDF5 checkpoint (lib/ckpt): SAVE/iter_NNNNNNN/mp_rank_00.h5 plus
// SAVE/latest_checkpointed_iteration.txt, published atomically.
//
// Each rank writes its own part, in parallel with the others, into one staging directory that
// rank 0 then publishes:
//   mp_rank_TT[_PPP].h5        written by data-parallel rank 0 of each tensor/pipeline rank:
//     model/<name>                               the rank's piece of each weight, fp32, with the
//                                                global shape and the tensor-parallel split (dim,
//                                                rank, count, chunks for SwiGLU's fc1); a stage
//                                                holds its layers under their global numbers
//     optimizer/{exp_avg,exp_avg_sq}/<name>      the same pieces of Adam's moments, unless
//                                                --no-save-optim or kept per data-parallel rank
//     rng/dropout_state                          int64 [seed, micro steps], unless --no-save-rng
//   mp_rank_TT[_PPP]_dp_DDD.h5  with --use-distributed-optimizer and DP > 1, every data-parallel
//                              rank: the flat range of each moment it owns (Megatron's
//                              distrib_optim.pt per rank)
// The fp32 weights are the master copy, so optimizer/fp32_master_params is stored only by a run
// whose weights differ from it; where a checkpoint has it, it is loaded.
// Metadata in every file: iteration, consumed train/valid samples, FLOPs so far, the arguments
// and tokenizer as JSON, the scheduler state (Megatron's keys), the file's layout coordinates,
// extra_json["optimizer"] = {"step": t, ..., "fp32_master_params": "model"}, with a dynamic loss
// scale extra_json["grad_scaler"] = {"scale", "growth_tracker", "hysteresis_tracker"} (both
// unless --no-save-optim),
// extra_json["parallel_layout"] (the sizes the run trained with) and extra_json["shard"] (the
// pipeline stage's first layer and layer count).
//
// No tensor travels between ranks to save, and no rank holds more than its own part. Loading
// assembles each tensor from the pieces of whatever layout wrote them (ckpt/sharded_checkpoint.hpp,
// one tensor at a time) and keeps this rank's part, so a checkpoint resumes on any tensor-,
// pipeline- or data-parallel layout; checkpoints of whole tensors in one file (written before
// format version 2) load the same way.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/save_directory_lock.hpp"
#include "ckpt/shard_file_snapshot.hpp"
#include "dist/communicator.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_parameters.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/loss_scaler.hpp"
#include "train/lr_schedule.hpp"

namespace mgt {

// Where training stands: everything besides tensors that an exact resume needs.
struct TrainingProgress {
  std::int64_t iteration = 0;
  std::int64_t consumed_train_samples = 0;
  // Of consumed_train_samples, those of the iterations --iterations-to-skip skipped (Megatron's
  // args.skipped_train_samples, kept by its checkpoints).
  std::int64_t skipped_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  double num_floating_point_operations_so_far = 0.0;
  // Dropout masks are a function of (seed, micro step); micro_steps counts the micro-batches
  // trained so far, so a resumed run draws the masks the uninterrupted run would have drawn.
  std::uint64_t dropout_seed = 1234;
  std::int64_t micro_steps = 0;
  // The Hugging Face architecture a model imported by mgt-ckpt-convert came from (its
  // "hf_architecture" record, hf_architecture_record.hpp; "" for none): carried from the loaded
  // checkpoint into every save, --finetune included, so that a fine-tuned Mistral exports as one.
  std::string hf_architecture_json;
};

// The live objects a checkpoint is taken from and restored into.
struct TrainCheckpointParts {
  GptParameters& params;
  AdamWOptimizer& optimizer;
  OptimizerParamScheduler& scheduler;
  TrainingProgress& progress;
  LossScaler* loss_scaler = nullptr;  // --fp16's (or --loss-scale's); null: no loss scaling
  // FP8 training's amax histories and scales (null: none). Stored per linear layer as
  // fp8/<layer>/{forward_amax_history, forward_scale, backward_amax_history, backward_scale}
  // (the same on every tensor- and data-parallel rank, whose amaxes are reduced), so that they
  // follow a layer into any layout.
  Fp8Training* fp8 = nullptr;
};

struct TrainCheckpointSaveSettings {
  bool save_optimizer = true;  // not --no-save-optim
  bool save_rng = true;        // not --no-save-rng
  std::string args_json = "{}";
  std::string tokenizer_json = "{}";
  // extra_json["parallel_layout"]: how the run is laid out over ranks (JSON object).
  std::string parallel_layout_json = "{}";
  // With expert parallelism, on rank 0 of an expert-data-parallel group that is not data-parallel
  // rank 0: this rank's experts are stored by no one else, so it writes their weights (and
  // their optimizer state, when that is not sharded) into its data-parallel shard file, under
  // their global names.
  bool writes_experts = false;
  // With expert parallelism every data-parallel rank writes its data-parallel shard file (empty
  // where it has nothing of its own to store), so that a complete checkpoint holds one per rank,
  // as with the distributed optimizer.
  bool expert_parallel = false;
};

// Opens save_dir for a run's saves: creates it, takes its writer lock (mgt::Error naming the
// directory and the holder's host and PID when another process writes there), and only then
// clears what interrupted saves left. Hold the lock for as long as the run may save.
ckpt::SaveDirectoryLock open_save_directory(const std::string& save_dir);

// Committed checkpoints are never replaced, so a run that would save an iteration save_dir
// already holds stops before training (mgt::Error naming the directory): the iterations in
// (start_iteration, last_iteration] that are multiples of save_interval, and last_iteration
// itself. A save at another iteration (a signal, a time limit) is refused when it comes.
void require_planned_saves_new(const std::string& save_dir, std::int64_t start_iteration,
                               std::int64_t last_iteration, std::int64_t save_interval);

// This rank's part of the checkpoint of progress.iteration, file by file and tensor by tensor,
// each tensor copied off the device as it is handed to `sink` (ckpt/shard_file_snapshot.hpp):
// what the rank writes, synchronously or in the background (async_checkpoint_save.hpp). No
// communication.
void emit_train_checkpoint(const TrainCheckpointParts& parts, const TrainCheckpointSaveSettings& settings,
                           const ckpt::WorldLayout& layout, ckpt::ShardFileSink& sink);
// All of it in host memory at once.
std::vector<ckpt::ShardFileSnapshot> snapshot_train_checkpoint(const TrainCheckpointParts& parts,
                                                               const TrainCheckpointSaveSettings& settings,
                                                               const ckpt::WorldLayout& layout);

// The steps of one save over `world`, each collective: rank 0 (the holder of save_dir's lock,
// open_save_directory) prepares a staging directory that every rank writes its own files into,
// then publishes it. A failure on any rank abandons the save and is thrown on every rank
// (FailedOnSomeRank where it failed elsewhere) as "checkpoint of iteration N not saved: WHY; the
// last checkpoint (...) is intact", SAVE unchanged.
class CollectiveSave {
public:
  // Prepares the staging directory (mgt::Error on every rank when save_dir already holds
  // that iteration).
  CollectiveSave(std::string save_dir, std::int64_t iteration, dist::Communicator& world);
  // Unpublished: rank 0 removes the staging directory (best effort; later saves clean up too).
  ~CollectiveSave();
  CollectiveSave(const CollectiveSave&) = delete;
  CollectiveSave& operator=(const CollectiveSave&) = delete;

  const std::string& staging_dir() const { return staging_dir_; }
  std::int64_t iteration() const { return iteration_; }
  const std::string& save_dir() const { return save_dir_; }
  std::string directory() const;  // SAVE/iter_NNNNNNN, once published
  // Runs `step` on this rank, then agrees over all ranks whether it failed anywhere.
  void run(const char* what, const std::function<void()>& step);
  // Every rank's files are written and synced: rank 0 renames the directory into place and
  // moves the tracker file to it.
  void publish();

private:
  std::string save_dir_;
  std::int64_t iteration_;
  dist::Communicator& world_;
  std::string staging_dir_;
  bool prepared_ = false;
  bool published_ = false;
};

// One rank's share of a save: the bytes of the files it wrote, the seconds of the copy of its
// state to host memory, and of writing and syncing its files.
struct RankSaveStatistics {
  std::uint64_t bytes = 0;
  double copy_seconds = 0.0;
  double write_seconds = 0.0;
};
// Collective: every rank's statistics, by world rank.
std::vector<RankSaveStatistics> gather_save_statistics(dist::Communicator& world, const RankSaveStatistics& mine);

struct SavedTrainCheckpoint {
  std::string directory;                 // SAVE/iter_NNNNNNN
  std::vector<RankSaveStatistics> ranks;  // by world rank
};

// Collective over `world`: writes the checkpoint of progress.iteration into save_dir, each rank
// its own files (layout: the sizes and this rank's coordinates), and moves the tracker file to
// it once every rank has written (CollectiveSave). Each rank writes each tensor as soon as it
// has copied it to host memory. World rank 0 holds save_dir's lock
// (open_save_directory).
SavedTrainCheckpoint save_train_checkpoint(const std::string& save_dir, const TrainCheckpointParts& parts,
                                           const TrainCheckpointSaveSettings& settings, dist::Communicator& world,
                                           const ckpt::WorldLayout& layout);
// A lone process.
SavedTrainCheckpoint save_train_checkpoint(const std::string& save_dir, const TrainCheckpointParts& parts,
                                           const TrainCheckpointSaveSettings& settings);

struct TrainCheckpointLoadSettings {
  bool load_optimizer = true;  // not --no-load-optim: moments, step count and scheduler
  bool load_rng = true;        // not --no-load-rng
  bool finetune = false;       // --finetune: weights only, progress starts at zero
  std::optional<std::int64_t> ckpt_step;  // --ckpt-step: this iteration, not the tracker's
  SchedulerResume scheduler_resume = SchedulerResume::RequireMatch;
};

// The padded vocabulary size recorded in the arguments of the checkpoint --load would resume
// (nullopt: no checkpoint, or none readable: loading it reports why). A run keeps it, so that a
// checkpoint padded for one tensor-parallel size resumes on another.
std::optional<std::int64_t> checkpoint_padded_vocab_size(const std::string& load_dir,
                                                         std::optional<std::int64_t> ckpt_step = std::nullopt);

// Restores the checkpoint the tracker file in load_dir names; without a tracker file, or when an
// iteration directory newer than the tracker's is complete (a save killed before it moved the
// tracker), the newest complete iteration directory, with a warning naming both (mgt::Error when
// there are iteration directories, no tracker file and none is complete;
// ckpt::find_checkpoint_to_resume). Returns its directory, or nullopt when load_dir holds no checkpoint
// (nothing is changed then). Each tensor is assembled whole from the stored pieces and this rank
// keeps its tensor-parallel shard (and, with the distributed optimizer, its part of the moments). Throws mgt::Error naming the
// tensor when a shape differs from the model's, when a tensor is missing or is not one of the
// model's parameters, and when optimizer or RNG state is asked for but was not saved.
std::optional<std::string> load_train_checkpoint(const std::string& load_dir, const TrainCheckpointParts& parts,
                                                 const TrainCheckpointLoadSettings& settings);

}  // namespace mgt
