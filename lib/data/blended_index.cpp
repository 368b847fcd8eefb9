#include "data/blended_index.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/md5.hpp"
#include "data/numpy_math.hpp"

namespace mgt {

namespace {

std::vector<std::string> split_words(const std::vector<std::string>& items) {
  std::vector<std::string> words;
  for (const auto& item : items) {
    std::istringstream in(item);
    std::string w;
    while (in >> w) words.push_back(w);
  }
  return words;
}

// Python's float() of a whole word, or nullopt.
std::optional<double> parse_float(const std::string& word) {
  if (word.empty()) return std::nullopt;
  if (word.size() > 1 && word[0] == '0' && (word[1] == 'x' || word[1] == 'X')) return std::nullopt;
  const char* begin = word.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end != begin + word.size()) return std::nullopt;
  return v;
}

}  // namespace

Blend parse_blend(const std::vector<std::string>& items, const std::string& flag) {
  std::vector<std::string> words = split_words(items);
  if (words.empty()) throw UsageError(flag + ": no dataset prefix given");
  Blend blend;
  if (words.size() % 2 == 1) {
    if (parse_float(words[0]))
      throw UsageError(flag + ": an odd number of items (" + std::to_string(words.size()) +
                       ") starting with the weight '" + words[0] +
                       "': give WEIGHT PREFIX pairs, or prefixes only");
    blend.prefixes = words;
    return blend;
  }
  std::vector<double> weights;
  std::size_t parsed = 0;
  for (std::size_t i = 0; i < words.size(); i += 2) {
    auto w = parse_float(words[i]);
    if (w) ++parsed;
    weights.push_back(w.value_or(0.0));
  }
  if (parsed == 0) {
    blend.prefixes = words;
    return blend;
  }
  if (parsed != weights.size())
    throw UsageError(flag + ": some items in weight position are not numbers: give WEIGHT PREFIX "
                     "pairs, or prefixes only");
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0.0) || !std::isfinite(weights[i]))
      throw UsageError(flag + ": the weight '" + words[2 * i] + "' of " + words[2 * i + 1] +
                       " is not a positive number");
    blend.prefixes.push_back(words[2 * i + 1]);
  }
  // The weights are normalised by their sum: an infinite sum, or a weight that vanishes beside
  // it, would blame an empty member later, after the members' indices are built.
  double total = numpy_sum(weights);
  if (!std::isfinite(total))
    throw UsageError(flag + ": the weights sum to more than a double holds: give smaller weights");
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!(weights[i] / total > 0.0))
      throw UsageError(flag + ": the weight '" + words[2 * i] + "' of " + words[2 * i + 1] +
                       " is zero beside the weights' sum");
  blend.weights = std::move(weights);
  return blend;
}

std::vector<std::int64_t> dataset_budgets(std::span<const double> normalized_weights,
                                          std::int64_t target, double surplus) {
  std::vector<std::int64_t> out;
  for (double w : normalized_weights) {
    double planned = std::ceil(static_cast<double>(target) * w);
    out.push_back(static_cast<std::int64_t>(std::ceil(planned * (1.0 + surplus))));
  }
  return out;
}

BlendingIndices build_blending_indices(std::span<const double> weights, std::int64_t size) {
  if (weights.empty()) throw Error("internal error: blending no datasets");
  BlendingIndices out;
  out.dataset_index.resize(static_cast<std::size_t>(size));
  out.dataset_sample_index.resize(static_cast<std::size_t>(size));
  std::vector<std::int64_t> counts(weights.size(), 0);
  for (std::int64_t s = 0; s < size; ++s) {
    double x = std::max(static_cast<double>(s), 1.0);
    std::size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(counts[0]);
    for (std::size_t d = 1; d < weights.size(); ++d) {
      double error = weights[d] * x - static_cast<double>(counts[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    out.dataset_index[static_cast<std::size_t>(s)] = static_cast<std::int16_t>(best);
    out.dataset_sample_index[static_cast<std::size_t>(s)] = counts[best]++;
  }
  return out;
}

BlendingIndices build_exhaustive_blending_indices(std::span<const std::int64_t> sizes) {
  std::int64_t total = 0;
  for (auto s : sizes) total += s;
  std::vector<double> weights;
  std::set<std::size_t> unspent;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    weights.push_back(static_cast<double>(sizes[i]) / static_cast<double>(total));
    if (sizes[i] > 0) unspent.insert(i);
  }
  BlendingIndices out;
  std::vector<std::int64_t> counts(sizes.size(), 0);
  for (std::int64_t s = 0; !unspent.empty(); ++s) {
    double x = std::max(static_cast<double>(s), 1.0);
    std::size_t best = *unspent.begin();
    double best_error = std::numeric_limits<double>::lowest();
    for (std::size_t d : unspent) {
      double error = weights[d] * x - static_cast<double>(counts[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    out.dataset_index.push_back(static_cast<std::int16_t>(best));
    out.dataset_sample_index.push_back(counts[best]++);
    if (counts[best] == sizes[best]) unspent.erase(best);
  }
  return out;
}

std::vector<std::string> blended_cache_files(const std::string& directory, const std::string& hash,
                                             Split split) {
  std::string base = hash + "-BlendedDataset-" + split_name(split) + "-";
  return {join_path(directory, base + "description.txt"),
          join_path(directory, base + "dataset_index.npy"),
          join_path(directory, base + "dataset_sample_index.npy")};
}

BlendedDatasetIndex build_blended_dataset_index(const std::vector<const GptDatasetIndex*>& members,
                                                std::vector<double> weights,
                                                std::optional<std::int64_t> size,
                                                const GptDatasetConfig& config) {
  if (members.empty() || members.size() != weights.size())
    throw Error("internal error: a blend needs one weight per dataset");
  if (members.size() >= 32767) throw UsageError("a blend holds at most 32766 datasets");
  for (double w : weights)
    if (!(w > 0.0)) throw Error("a blended dataset weight is not positive (is a member empty?)");

  BlendedDatasetIndex index;
  index.split = members[0]->split;
  index.requested_size = size;
  index.integer_weights = !size.has_value();
  index.weights = size ? numpy_normalize(weights) : weights;

  PyValue datasets = PyValue::list();
  for (const auto* m : members) datasets.append(m->identifiers);
  PyValue weight_values = PyValue::list();
  for (double w : index.weights)
    weight_values.append(index.integer_weights ? PyValue::integer(static_cast<std::int64_t>(w))
                                               : PyValue::real(w));
  PyValue d = PyValue::dict();
  d.set("class", PyValue::string("BlendedDataset"));
  d.set("datasets", std::move(datasets));
  d.set("split", PyValue::string(split_name(index.split)));
  d.set("weights", std::move(weight_values));
  d.set("size", size ? PyValue::integer(*size) : PyValue::none());
  index.description = d.dumps();
  index.hash = md5_hex(index.description);

  std::int64_t expected_size = 0;
  if (size) {
    expected_size = *size;
  } else {
    for (double w : weights) expected_size += static_cast<std::int64_t>(w);
  }

  if (config.path_to_cache) {
    index.cache_directory = *config.path_to_cache;
    index.cache_files = blended_cache_files(index.cache_directory, index.hash, index.split);
    if (cache_files_exist(index.cache_files)) {
      const auto& files = index.cache_files;
      log::info("Load the BlendedDataset " + std::string(split_name(index.split)) + " indices from " +
                index.cache_directory);
      if (read_cached_description(files[0]) != index.description)
        throw Error(files[0] + ": the description differs from this configuration's although its "
                    "hash is the same: delete the cached files to rebuild");
      index.dataset_index = load_npy(files[1], {NpyDType::Int16}, 1);
      index.dataset_sample_index = load_npy(files[2], {NpyDType::Int64}, 1);
      if (index.dataset_index.size() != static_cast<std::size_t>(expected_size) ||
          index.dataset_sample_index.size() != index.dataset_index.size())
        throw Error(files[1] + ": " + std::to_string(index.dataset_index.size()) +
                    " entries where the blend has " + std::to_string(expected_size) +
                    ": delete the cached files to rebuild");
      for (std::size_t i = 0; i < index.size(); ++i) {
        auto ds = index.dataset_index.get(i);
        auto sample = index.dataset_sample_index.get(i);
        if (ds < 0 || static_cast<std::size_t>(ds) >= members.size() || sample < 0 ||
            static_cast<std::size_t>(sample) >= members[static_cast<std::size_t>(ds)]->size())
          throw Error(files[1] + ": entry " + std::to_string(i) + " names sample " +
                      std::to_string(sample) + " of dataset " + std::to_string(ds) +
                      ", which does not exist: delete the cached files to rebuild");
      }
      index.loaded_from_cache = true;
      return index;
    }
  }

  log::info("Build the BlendedDataset " + std::string(split_name(index.split)) + " indices");
  BlendingIndices built;
  if (size) {
    built = build_blending_indices(index.weights, *size);
  } else {
    std::vector<std::int64_t> sizes;
    for (double w : weights) sizes.push_back(static_cast<std::int64_t>(w));
    built = build_exhaustive_blending_indices(sizes);
  }
  std::vector<std::int64_t> drawn(members.size(), 0);
  for (auto ds : built.dataset_index) ++drawn[static_cast<std::size_t>(ds)];
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (static_cast<std::size_t>(drawn[i]) > members[i]->size())
      throw Error("the " + std::string(split_name(index.split)) + " blend asks " +
                  members[i]->dataset_path + " for " + std::to_string(drawn[i]) +
                  " samples, more than its " + std::to_string(members[i]->size()) +
                  " (raise --mid-level-dataset-surplus, now " +
                  std::to_string(config.mid_level_dataset_surplus) + ")");
  }
  std::size_t n = built.dataset_index.size();
  index.dataset_index = NpyArray::from_vector(std::move(built.dataset_index), {n});
  index.dataset_sample_index = NpyArray::from_vector(std::move(built.dataset_sample_index), {n});

  if (!index.cache_files.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(index.cache_directory, ec);
    if (ec)
      throw Error("cannot create the cache directory " + index.cache_directory + ": " + ec.message());
    write_npy(index.cache_files[1], index.dataset_index);
    write_npy(index.cache_files[2], index.dataset_sample_index);
    write_file_atomically(index.cache_files[0], index.description);
  } else {
    log::info("BlendedDataset indices are not cached without --data-cache-path");
  }
  return index;
}

}  // namespace mgt
