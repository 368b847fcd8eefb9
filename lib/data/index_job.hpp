// mgt-index's work: from Megatron's data flags, build (or find in the cache) the GPTDataset and
// BlendedDataset indices of the train, valid and test splits, exactly as Megatron's
// BlendedMegatronDatasetBuilder would for pretrain_gpt.py, and report what was built.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/batch_size_rampup.hpp"
#include "data/blended_index.hpp"
#include "data/dataset_flags.hpp"
#include "data/gpt_dataset_index.hpp"
#include "data/gpt_sample.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// The dataset source flags (data/dataset_flags.hpp) and the sizes that decide each split's samples.
struct IndexOptions : DatasetSourceOptions {
  std::optional<std::int64_t> seq_length;    // --seq-length (required)
  std::int64_t seed = kDefaultSeed;          // --seed
  std::optional<std::int64_t> train_samples;   // --train-samples
  std::optional<std::int64_t> train_iters;     // --train-iters
  std::optional<std::int64_t> global_batch_size;  // --global-batch-size
  std::optional<std::int64_t> micro_batch_size;   // --micro-batch-size
  // --rampup-batch-size (with --train-samples): the run's iterations, and so the validation
  // samples, follow the ramp-up (data/batch_size_rampup.hpp).
  std::optional<BatchSizeRampup> rampup_batch_size;
  std::int64_t eval_iters = kDefaultEvalIters;        // --eval-iters
  std::int64_t eval_interval = kDefaultEvalInterval;  // --eval-interval
  TokenizerOptions tokenizer;
  // Sample options: they do not change the indices, only what --dump-samples writes.
  bool eod_mask_loss = false;         // --eod-mask-loss
  bool reset_position_ids = false;    // --reset-position-ids
  bool reset_attention_mask = false;  // --reset-attention-mask
  // --dump-samples FILE: the first dump_count samples of each split as JSON lines, to compare
  // with what Megatron's datasets return.
  std::optional<std::string> dump_samples_path;
  std::int64_t dump_count = 16;  // --dump-count
};

// Samples requested per split (training.py get_train_valid_test_num_samples): train =
// train_samples or train_iters * gbs; valid = (train_iters // eval_interval + 1) * eval_iters *
// gbs, train_iters being train_samples // gbs in sample-based runs; test = eval_iters * gbs.
// Throws mgt::UsageError for missing or contradictory flags.
std::array<std::int64_t, 3> requested_samples(const IndexOptions& options);

// GPTDatasetConfig from the flags (core_gpt_dataset_config_from_args).
GptDatasetConfig dataset_config(const IndexOptions& options, const Tokenizer& tokenizer);

struct SplitIndices {
  Split split = Split::Train;
  std::int64_t requested = 0;
  std::vector<GptDatasetIndex> datasets;     // one, or the members of the blend
  std::optional<BlendedDatasetIndex> blend;  // present for a blend of datasets

  std::size_t size() const { return blend ? blend->size() : datasets.at(0).size(); }
};

struct IndexResult {
  GptDatasetConfig config;
  std::array<std::optional<SplitIndices>, 3> splits;  // absent: split not built (zero width)
};

// Checks the options, then builds or loads every index. Throws mgt::Error (UsageError for flags).
IndexResult build_indices(const IndexOptions& options, const Tokenizer& tokenizer);

// The result as JSON (stdout) and as a table for people (stderr).
std::string index_summary_json(const IndexResult& result);
std::string index_summary_table(const IndexResult& result);

// JSON lines {"split", "index", "dataset_id", "tokens", "labels", "loss_mask", "position_ids",
// "segment_starts"} for the first `count` samples of every split, written atomically.
void dump_samples(const IndexResult& result, const GptSampleOptions& sample_options,
                  std::int64_t count, const std::string& path);

// make_tokenizer + build_indices + both summaries (+ the sample dump). Returns the exit code.
int run_index(const IndexOptions& options);

}  // namespace mgt
