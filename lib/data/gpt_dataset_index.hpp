// Megatron's GPTDataset indices for one split of one dataset: the unique description and its
// MD5, the cache files named after it, and building them (or loading them when all four files
// already exist), byte-identical to megatron-core v0.13 (spec/megatron.md §4).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset_split.hpp"
#include "data/indexed_dataset.hpp"
#include "data/npy.hpp"
#include "data/python_json.hpp"

namespace mgt {

class Tokenizer;

// What Megatron's MegatronTokenizer.unique_identifiers holds: the class name, the paths given to
// its constructor (a path may be None) and its keyword options, as strings.
struct TokenizerIdentity {
  std::string class_name;
  std::vector<std::optional<std::string>> tokenizer_paths;
  std::vector<std::pair<std::string, std::string>> options;

  PyValue to_value() const;
};

// Megatron builds _NullTokenizer with a single None path; a tokenizer that reports no path is
// taken to mean exactly that.
TokenizerIdentity tokenizer_identity(const Tokenizer& tokenizer);

// The GPTDatasetConfig fields that shape the indices.
struct GptDatasetConfig {
  std::uint32_t random_seed = 1234;
  std::int64_t sequence_length = 0;
  // The --split text exactly as given, and its matrix; both absent with per-split data paths.
  std::optional<std::string> split;
  std::optional<SplitMatrix> split_matrix;
  TokenizerIdentity tokenizer;
  // --data-cache-path; when absent, GPTDataset caches under <prefix>/cache/GPTDataset_indices and
  // BlendedDataset does not cache at all.
  std::optional<std::string> path_to_cache;
  bool add_extra_token_to_sequence = true;
  bool drop_last_partial_validation_sequence = true;
  double mid_level_dataset_surplus = 0.005;

  int add_extra() const { return add_extra_token_to_sequence ? 1 : 0; }
};

// os.path.join for two components.
std::string join_path(const std::string& a, const std::string& b);

// MegatronDataset.unique_identifiers of a GPTDataset (also nested in BlendedDataset's).
PyValue gpt_dataset_identifiers(const std::string& dataset_path,
                                std::optional<std::int64_t> num_samples, Split split,
                                const GptDatasetConfig& config);

struct GptDatasetIndex {
  std::shared_ptr<const IndexedDataset> dataset;
  std::string dataset_path;  // the prefix as given
  Split split = Split::Train;
  std::pair<std::int64_t, std::int64_t> sequence_range{0, 0};  // [begin, end) of sequences
  std::optional<std::int64_t> num_samples;                      // requested
  PyValue identifiers;
  std::string description;
  std::string hash;

  std::int64_t tokens_per_epoch = 0;
  std::int64_t num_epochs = 0;
  bool separate_final_epoch = false;

  NpyArray document_index;  // int32 [epochs * sequences]
  NpyArray sample_index;    // int32 or int64 [samples + 1, 2]
  NpyArray shuffle_index;   // uint32 or int64 [samples]

  std::string cache_directory;          // empty when not cached
  std::vector<std::string> cache_files;  // description, document, sample, shuffle
  bool loaded_from_cache = false;

  std::size_t size() const { return shuffle_index.size(); }  // len(GPTDataset)
};

// Megatron's cache hit: every file of the set exists (a missing one means a rebuild).
bool cache_files_exist(const std::vector<std::string>& paths);
// A cached description file's text; throws mgt::Error naming the file.
std::string read_cached_description(const std::string& path);

// Cache file names: <hash>-GPTDataset-<split>-{description.txt,document_index.npy,...}.
std::vector<std::string> gpt_cache_files(const std::string& directory, const std::string& hash,
                                         Split split);

// Builds the indices of sequences [range.first, range.second) of `dataset`, or loads them from
// the cache when all four files exist (validated: a corrupt or mismatched file is an error
// naming it). Newly built indices are written atomically.
GptDatasetIndex build_gpt_dataset_index(std::shared_ptr<const IndexedDataset> dataset,
                                        const std::string& dataset_path,
                                        std::pair<std::int64_t, std::int64_t> range,
                                        std::optional<std::int64_t> num_samples, Split split,
                                        const GptDatasetConfig& config);

}  // namespace mgt
