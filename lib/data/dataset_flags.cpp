#include "data/dataset_flags.hpp"

namespace mgt {

namespace {

// Megatron keeps --rampup-batch-size's strings (nargs='*').
ArgValue rampup_strings(const std::optional<BatchSizeRampup>& r) {
  if (!r) return {};
  return std::vector<std::string>{std::to_string(r->start), std::to_string(r->increment), std::to_string(r->samples)};
}

}  // namespace

// Ranges of the numbers: core/flag_ranges.cpp. Checks between flags: data/index_job.cpp
// (requested_samples, dataset_config) for both programs, train/train_options_validate.cpp for
// what only training needs.
// clang-format off
std::vector<FlagDefinition> dataset_source_flags(DatasetSourceOptions& o, std::string data_path_help) {
  return {
    store_list("data-path", "[W] PREFIX...", o.data_path, std::move(data_path_help)),
    store("data-args-path", "FILE", o.data_args_path, "File holding the --data-path list"),
    // None until the indices are built: Megatron's legacy default applies to --data-path only.
    store("split", "A,B,C", o.split, "Train, valid, test proportions")
        .default_text("\"" + std::string(kDefaultSplit) + "\""),
    store_list("train-data-path", "[W] PREFIX...", o.train_data_path, "Train split datasets, instead of --data-path"),
    store_list("valid-data-path", "[W] PREFIX...", o.valid_data_path, "Validation split datasets"),
    store_list("test-data-path", "[W] PREFIX...", o.test_data_path, "Test split datasets"),
    store("per-split-data-args-path", "FILE", o.per_split_data_args_path, "JSON file holding the per-split paths: {\"train\": [...], \"valid\": [...], \"test\": [...]}, each a list, a string of words or null"),
    store("data-cache-path", "DIR", o.data_cache_path, "Directory for the index files; blend indices are cached only here")
        .default_text("PREFIX/cache/GPTDataset_indices"),
    store("mid-level-dataset-surplus", "F", o.mid_level_dataset_surplus, "Extra fraction of samples built per blended dataset"),
  };
}

FlagDefinition seq_length_flag(std::optional<std::int64_t>& field) {
  return store("seq-length", "N", field, "Tokens per sample");
}
FlagDefinition micro_batch_size_flag(std::optional<std::int64_t>& field) {
  return store("micro-batch-size", "N", field, "Samples per micro-batch");
}
FlagDefinition global_batch_size_flag(std::optional<std::int64_t>& field) {
  return store("global-batch-size", "N", field, "Samples per iteration");
}
FlagDefinition train_iters_flag(std::optional<std::int64_t>& field) {
  return store("train-iters", "N", field, "Iterations to train (required, or --train-samples)");
}
FlagDefinition train_samples_flag(std::optional<std::int64_t>& field) {
  return store("train-samples", "N", field, "Samples to train (required, or --train-iters)");
}
FlagDefinition rampup_batch_size_flag(std::optional<BatchSizeRampup>& field) {
  return custom_flag("rampup-batch-size", FlagArity::Many, "START INCREMENT SAMPLES",
                     "Ramp the global batch size up from START by INCREMENT over SAMPLES samples (with --train-samples)",
                     [&field](const std::vector<std::string>& values) { field = parse_rampup_batch_size(values); },
                     [&field] { return rampup_strings(field); });
}
FlagDefinition eval_iters_flag(std::int64_t& field) {
  return store("eval-iters", "N", field, "Iterations per validation");
}
FlagDefinition eval_interval_flag(std::int64_t& field) {
  return store("eval-interval", "N", field, "Iterations between validations");
}
FlagDefinition seed_flag(std::int64_t& field) {
  return store("seed", "N", field, "Random seed");
}

std::vector<FlagDefinition> sample_flags(SampleFlagFields f) {
  return {
    store_true("eod-mask-loss", f.eod_mask_loss, "No loss on end-of-document input tokens"),
    store_true("reset-position-ids", f.reset_position_ids, "Positions restart after each end of document"),
    store_true("reset-attention-mask", f.reset_attention_mask, "No attention across document boundaries"),
  };
}
// clang-format on

}  // namespace mgt
