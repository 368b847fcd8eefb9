#include "data/gpt_dataset_index.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/log.hpp"
#include "core/md5.hpp"
#include "data/gpt_index_arrays.hpp"
#include "data/numpy_random.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

PyValue TokenizerIdentity::to_value() const {
  PyValue paths = PyValue::list();
  for (const auto& p : tokenizer_paths) paths.append(PyValue::string_or_none(p));
  PyValue v = PyValue::dict();
  v.set("class", PyValue::string(class_name));
  v.set("tokenizer_path", std::move(paths));
  for (const auto& [key, value] : options) v.set(key, PyValue::string(value));
  return v;
}

TokenizerIdentity tokenizer_identity(const Tokenizer& tokenizer) {
  TokenizerIdentity id;
  id.class_name = tokenizer.class_name();
  for (const auto& p : tokenizer.tokenizer_paths()) id.tokenizer_paths.emplace_back(p);
  if (id.tokenizer_paths.empty()) id.tokenizer_paths.emplace_back(std::nullopt);
  id.options = tokenizer.tokenizer_options();
  return id;
}

std::string join_path(const std::string& a, const std::string& b) {
  if (a.empty() || (!b.empty() && b.front() == '/')) return b;
  return a.back() == '/' ? a + b : a + "/" + b;
}

PyValue gpt_dataset_identifiers(const std::string& dataset_path,
                                std::optional<std::int64_t> num_samples, Split split,
                                const GptDatasetConfig& config) {
  PyValue v = PyValue::dict();
  v.set("class", PyValue::string("GPTDataset"));
  v.set("dataset_path", PyValue::string(dataset_path));
  v.set("num_samples", num_samples ? PyValue::integer(*num_samples) : PyValue::none());
  v.set("index_split", PyValue::string(split_name(split)));
  v.set("random_seed", PyValue::integer(config.random_seed));
  v.set("sequence_length", PyValue::integer(config.sequence_length));
  v.set("split", PyValue::string_or_none(config.split));
  v.set("split_matrix", config.split_matrix ? split_matrix_value(*config.split_matrix) : PyValue::none());
  v.set("tokenizer", config.tokenizer.to_value());
  return v;
}

std::vector<std::string> gpt_cache_files(const std::string& directory, const std::string& hash,
                                         Split split) {
  std::string base = hash + "-GPTDataset-" + split_name(split) + "-";
  return {join_path(directory, base + "description.txt"),
          join_path(directory, base + "document_index.npy"),
          join_path(directory, base + "sample_index.npy"),
          join_path(directory, base + "shuffle_index.npy")};
}

bool cache_files_exist(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) return false;
  }
  return true;
}

std::string read_cached_description(const std::string& path) { return read_input_file(path); }

namespace {

void make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create the cache directory " + dir + ": " + ec.message() +
                      " (choose a writable one with --data-cache-path)");
}

[[noreturn]] void stale(const std::string& path, const std::string& what) {
  throw Error(path + ": " + what +
              "; the cached index does not fit the dataset (was the dataset rewritten?): delete it "
              "to rebuild");
}

// Checks cached arrays against the dataset they claim to index, so that later sample reads
// cannot go out of bounds.
void validate_loaded(GptDatasetIndex& index, const std::vector<std::string>& files,
                     std::size_t sequences_in_split) {
  const auto& doc = index.document_index;
  std::size_t expected_docs = sequences_in_split * static_cast<std::size_t>(index.num_epochs);
  if (doc.size() != expected_docs)
    stale(files[1], std::to_string(doc.size()) + " entries where " + std::to_string(expected_docs) +
                        " (" + std::to_string(index.num_epochs) + " epochs of " +
                        std::to_string(sequences_in_split) + " sequences) are expected");
  auto docs = doc.values<std::int32_t>();
  for (std::int32_t d : docs)
    if (d < index.sequence_range.first || d >= index.sequence_range.second)
      stale(files[1], "sequence " + std::to_string(d) + " is outside the split's sequences [" +
                          std::to_string(index.sequence_range.first) + ", " +
                          std::to_string(index.sequence_range.second) + ")");
  const auto& sample = index.sample_index;
  if (sample.shape()[0] < 1) stale(files[2], "no rows");
  std::size_t rows = sample.shape()[0];
  for (std::size_t r = 0; r < rows; ++r) {
    std::int64_t pos = sample.get(2 * r), off = sample.get(2 * r + 1);
    if (pos < 0 || static_cast<std::size_t>(pos) >= docs.size() || off < -1)
      stale(files[2], "row " + std::to_string(r) + " (" + std::to_string(pos) + ", " +
                          std::to_string(off) + ") is outside the document index");
  }
  const auto& shuffle = index.shuffle_index;
  if (shuffle.size() != rows - 1)
    stale(files[3], std::to_string(shuffle.size()) + " entries for " + std::to_string(rows - 1) +
                        " samples");
  for (std::size_t i = 0; i < shuffle.size(); ++i) {
    std::int64_t s = shuffle.get(i);
    if (s < 0 || static_cast<std::size_t>(s) >= shuffle.size())
      stale(files[3], "entry " + std::to_string(i) + " = " + std::to_string(s) + " is not a sample");
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GptDatasetIndex build_gpt_dataset_index(std::shared_ptr<const IndexedDataset> dataset,
                                        const std::string& dataset_path,
                                        std::pair<std::int64_t, std::int64_t> range,
                                        std::optional<std::int64_t> num_samples, Split split,
                                        const GptDatasetConfig& config) {
  if (config.sequence_length <= 0) throw UsageError("--seq-length must be positive");
  GptDatasetIndex index;
  index.dataset = dataset;
  index.dataset_path = dataset_path;
  index.split = split;
  index.sequence_range = range;
  index.num_samples = num_samples;
  index.identifiers = gpt_dataset_identifiers(dataset_path, num_samples, split, config);
  index.description = index.identifiers.dumps();
  index.hash = md5_hex(index.description);

  if (range.first < 0 || range.second > static_cast<std::int64_t>(dataset->sequence_count()) ||
      range.first > range.second)
    throw Error("internal error: split range outside the dataset");
  std::vector<std::int32_t> sizes = dataset->sequence_lengths();
  std::vector<std::int32_t> documents;
  documents.reserve(static_cast<std::size_t>(range.second - range.first));
  for (std::int64_t i = range.first; i < range.second; ++i) {
    documents.push_back(static_cast<std::int32_t>(i));
    index.tokens_per_epoch += sizes[static_cast<std::size_t>(i)];
  }
  if (index.tokens_per_epoch == 0)
    throw Error("the " + std::string(split_name(split)) + " split of " + dataset_path +
                " (sequences [" + std::to_string(range.first) + ", " + std::to_string(range.second) +
                ") of " + std::to_string(dataset->sequence_count()) +
                ") holds no tokens: change --split or give more data");
  EpochPlan plan = plan_epochs(index.tokens_per_epoch, num_samples, config.sequence_length,
                               config.add_extra());
  index.num_epochs = plan.num_epochs;
  index.separate_final_epoch = plan.separate_final_epoch;

  index.cache_directory = config.path_to_cache
                              ? *config.path_to_cache
                              : join_path(join_path(dataset_path, "cache"), "GPTDataset_indices");
  index.cache_files = gpt_cache_files(index.cache_directory, index.hash, split);
  const auto& files = index.cache_files;

  if (cache_files_exist(files)) {
    log::info("Load the GPTDataset " + std::string(split_name(split)) + " indices from " +
              index.cache_directory);
    if (read_cached_description(files[0]) != index.description)
      throw Error(files[0] + ": the description differs from this configuration's although its "
                  "hash is the same: delete the cached files to rebuild");
    index.document_index = load_npy(files[1], {NpyDType::Int32}, 1);
    index.sample_index = load_npy(files[2], {NpyDType::Int32, NpyDType::Int64}, 2, 2);
    index.shuffle_index = load_npy(files[3], {NpyDType::UInt32, NpyDType::Int64}, 1);
    validate_loaded(index, files, documents.size());
    index.loaded_from_cache = true;
    log::info("> total number of samples: " + std::to_string(index.size()));
    return index;
  }

  check_index_memory("the " + std::string(split_name(split)) + " split of " + dataset_path,
                     static_cast<std::int64_t>(documents.size()), index.tokens_per_epoch, plan,
                     config.sequence_length);
  log::info("Build and save the GPTDataset " + std::string(split_name(split)) + " indices");
  auto start = std::chrono::steady_clock::now();
  NumpyRandomState random(config.random_seed);
  auto document_index =
      build_document_index(documents, plan.num_epochs, plan.separate_final_epoch, random);
  bool drop_last = split == Split::Valid ? config.drop_last_partial_validation_sequence : true;
  index.sample_index = build_sample_index(sizes, document_index, config.sequence_length,
                                          plan.num_epochs, index.tokens_per_epoch, drop_last,
                                          config.add_extra());
  index.document_index =
      NpyArray::from_vector(std::move(document_index), {documents.size() * static_cast<std::size_t>(plan.num_epochs)});
  std::int64_t total = static_cast<std::int64_t>(index.sample_index.shape()[0]) - 1;
  index.shuffle_index = build_shuffle_index(
      plan.separate_final_epoch ? plan.samples_sans_final_epoch : total, total, random);

  make_directories(index.cache_directory);
  // The description goes last: its presence marks a complete set.
  write_npy(files[1], index.document_index);
  write_npy(files[2], index.sample_index);
  write_npy(files[3], index.shuffle_index);
  write_file_atomically(files[0], index.description);

  char elapsed[64];
  std::snprintf(elapsed, sizeof elapsed, "%.3f", seconds_since(start));
  log::info("> time elapsed: " + std::string(elapsed) + " seconds");
  log::info("> total number of samples: " + std::to_string(total));
  log::info("> total number of epochs: " + std::to_string(plan.num_epochs));
  return index;
}

}  // namespace mgt
