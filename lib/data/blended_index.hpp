// Megatron's blend of several GPT datasets (spec/megatron.md §4.8): the --data-path list of
// weights and prefixes, how many samples each member must provide, the greedy blending indices
// (which member, which of its samples), and BlendedDataset's description and cache files.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/dataset_split.hpp"
#include "data/gpt_dataset_index.hpp"
#include "data/npy.hpp"

namespace mgt {

struct Blend {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;  // as given, not normalised
};

// get_blend_from_list: "w1 p1 w2 p2 ..." or "p1 p2 ...". Items are also split at whitespace, so
// a quoted "0.3 a 0.7 b" reads like the unquoted words. Throws mgt::UsageError naming `flag` for
// an empty list, weights that are not positive numbers, and pairs that do not pair up.
Blend parse_blend(const std::vector<std::string>& items, const std::string& flag);

// _get_size_per_split_per_dataset for one split: ceil(ceil(target * w) * (1 + surplus)) each.
std::vector<std::int64_t> dataset_budgets(std::span<const double> normalized_weights,
                                          std::int64_t target, double surplus);

struct BlendingIndices {
  std::vector<std::int16_t> dataset_index;         // member of each blended sample
  std::vector<std::int64_t> dataset_sample_index;  // sample within that member
};

// helpers.cpp build_blending_indices: for each sample, the member whose weight * max(s, 1)
// exceeds its count so far by the most (the first such member on ties).
BlendingIndices build_blending_indices(std::span<const double> weights, std::int64_t size);

// helpers.cpp build_exhaustive_blending_indices: the same greedy choice among the members not
// yet exhausted, until member i gave exactly sizes[i] samples.
BlendingIndices build_exhaustive_blending_indices(std::span<const std::int64_t> sizes);

struct BlendedDatasetIndex {
  Split split = Split::Train;
  std::vector<double> weights;  // as in the description
  bool integer_weights = false; // exhaustive blends keep member sizes as integer weights
  std::optional<std::int64_t> requested_size;
  std::string description;
  std::string hash;
  NpyArray dataset_index;         // int16
  NpyArray dataset_sample_index;  // int64
  std::string cache_directory;    // empty when --data-cache-path is not given
  std::vector<std::string> cache_files;
  bool loaded_from_cache = false;

  std::size_t size() const { return dataset_index.size(); }
};

std::vector<std::string> blended_cache_files(const std::string& directory, const std::string& hash,
                                             Split split);

// BlendedDataset(datasets, weights, size): normalises the weights when a size is given, builds
// (or loads from --data-cache-path) the indices, and refuses a blend that asks a member for more
// samples than it has. Without a size the weights are the members' integer sizes and the blend
// is exhaustive.
BlendedDatasetIndex build_blended_dataset_index(const std::vector<const GptDatasetIndex*>& members,
                                                std::vector<double> weights,
                                                std::optional<std::int64_t> size,
                                                const GptDatasetConfig& config);

}  // namespace mgt
