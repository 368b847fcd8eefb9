// The flags that decide which samples a run reads — where the datasets are, how they split, how
// many samples each split needs and the shuffles' seed — each defined once for mgt-train and
// mgt-index (core/flag_table.hpp). mgt-index promises the indices mgt-train builds for the same
// flags, so both take these definitions and these defaults, Megatron's (core_v0.13
// megatron/training/arguments.py).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/flag_table.hpp"
#include "data/batch_size_rampup.hpp"

namespace mgt {

inline constexpr const char* kDefaultSplit = "969, 30, 1";  // with --data-path, when --split is not given
inline constexpr std::int64_t kDefaultSeed = 1234;          // --seed
inline constexpr std::int64_t kDefaultEvalIters = 100;      // --eval-iters
inline constexpr std::int64_t kDefaultEvalInterval = 1000;  // --eval-interval

// Where the datasets are and how they split.
struct DatasetSourceOptions {
  std::vector<std::string> data_path;          // --data-path (weights and prefixes, or prefixes)
  std::optional<std::string> data_args_path;   // --data-args-path: a file holding that list
  std::vector<std::string> train_data_path;    // --train-data-path
  std::vector<std::string> valid_data_path;    // --valid-data-path
  std::vector<std::string> test_data_path;     // --test-data-path
  std::optional<std::string> per_split_data_args_path;  // --per-split-data-args-path: a JSON file of the three
  std::optional<std::string> split;            // --split; kDefaultSplit with --data-path
  std::optional<std::string> data_cache_path;  // --data-cache-path
  double mid_level_dataset_surplus = 0.005;    // --mid-level-dataset-surplus
};

// --data-path, --data-args-path, --split, the per-split paths, --data-cache-path and
// --mid-level-dataset-surplus. `data_path_help` is the description of --data-path, whose
// alternatives differ between programs.
std::vector<FlagDefinition> dataset_source_flags(DatasetSourceOptions& options, std::string data_path_help);

// The sizes that decide how many samples each split needs (training.py
// get_train_valid_test_num_samples), bound to the fields of the program that holds them.
FlagDefinition seq_length_flag(std::optional<std::int64_t>& field);
FlagDefinition micro_batch_size_flag(std::optional<std::int64_t>& field);
FlagDefinition global_batch_size_flag(std::optional<std::int64_t>& field);
FlagDefinition train_iters_flag(std::optional<std::int64_t>& field);
FlagDefinition train_samples_flag(std::optional<std::int64_t>& field);
FlagDefinition rampup_batch_size_flag(std::optional<BatchSizeRampup>& field);
FlagDefinition eval_iters_flag(std::int64_t& field);
FlagDefinition eval_interval_flag(std::int64_t& field);
FlagDefinition seed_flag(std::int64_t& field);

// --eod-mask-loss, --reset-position-ids, --reset-attention-mask: how a sample becomes inputs,
// labels, a loss mask and positions (data/gpt_sample.hpp).
struct SampleFlagFields {
  bool& eod_mask_loss;
  bool& reset_position_ids;
  bool& reset_attention_mask;
};
std::vector<FlagDefinition> sample_flags(SampleFlagFields fields);

}  // namespace mgt
