#include "data/index_job.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_text.hpp"
#include "core/log.hpp"
#include "data/numpy_math.hpp"

namespace mgt {

std::array<std::int64_t, 3> requested_samples(const IndexOptions& o) {
  std::int64_t gbs;
  if (o.global_batch_size) {
    gbs = *o.global_batch_size;
  } else if (o.micro_batch_size) {
    gbs = *o.micro_batch_size;  // Megatron: micro batch × data-parallel size; one rank here
    log::info("--global-batch-size not given: using --micro-batch-size " + std::to_string(gbs) +
              " (one data-parallel rank)");
  } else {
    throw UsageError("--global-batch-size (or --micro-batch-size) is required");
  }
  if (gbs <= 0) throw UsageError("--global-batch-size must be positive");
  if (o.micro_batch_size && *o.micro_batch_size <= 0) throw UsageError("--micro-batch-size must be positive");
  if (o.train_samples && o.train_iters)
    throw UsageError("--train-samples and --train-iters are mutually exclusive");
  if (!o.train_samples && !o.train_iters) throw UsageError("--train-iters or --train-samples is required");
  if (o.train_samples && *o.train_samples <= 0) throw UsageError("--train-samples must be positive");
  if (o.train_iters && *o.train_iters <= 0) throw UsageError("--train-iters must be positive");
  // Megatron's validate_args: 'expected no batch-size rampup for iteration-based training'.
  if (o.rampup_batch_size && o.train_iters)
    throw UsageError("--rampup-batch-size needs --train-samples (the ramp-up counts samples, not iterations)");
  if (o.eval_iters < 0) throw UsageError("--eval-iters must not be negative");
  if (o.eval_interval <= 0) throw UsageError("--eval-interval must be positive");

  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  auto mul = [](std::int64_t a, std::int64_t b, const char* what) {
    if (a != 0 && b > kMax / a) throw UsageError(std::string(what) + " overflows 64 bits");
    return a * b;
  };
  std::int64_t train = o.train_samples ? *o.train_samples : mul(*o.train_iters, gbs, "--train-iters × --global-batch-size");
  std::int64_t iters = o.train_iters ? *o.train_iters
                                     : GlobalBatchSizeSchedule(gbs, o.rampup_batch_size).train_iters(*o.train_samples);
  std::int64_t valid = mul(mul(iters / o.eval_interval + 1, o.eval_iters, "validation iterations"), gbs,
                           "validation samples");
  std::int64_t test = mul(o.eval_iters, gbs, "test samples");
  return {train, valid, test};
}

namespace {

bool per_split_paths(const IndexOptions& o) {
  return !o.train_data_path.empty() || !o.valid_data_path.empty() || !o.test_data_path.empty();
}

bool whole_data_path(const IndexOptions& o) { return !o.data_path.empty() || o.data_args_path; }

// --data-args-path: the file's whitespace-separated words, as Megatron's f.read().split().
std::vector<std::string> data_path_items(const IndexOptions& o) {
  if (!o.data_args_path) return o.data_path;
  std::istringstream in(read_input_file(*o.data_args_path, "--data-args-path"));
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  if (words.empty()) throw UsageError("--data-args-path: " + *o.data_args_path + " is empty");
  return words;
}

}  // namespace

GptDatasetConfig dataset_config(const IndexOptions& o, const Tokenizer& tokenizer) {
  GptDatasetConfig c;
  if (!o.seq_length) throw UsageError("--seq-length is required");
  if (*o.seq_length <= 0 || *o.seq_length >= std::numeric_limits<std::int32_t>::max())
    throw UsageError("--seq-length must be between 1 and 2147483646");
  c.sequence_length = *o.seq_length;
  if (o.seed < 0 || o.seed > 0xffffffffLL)
    throw UsageError("--seed must be between 0 and 4294967295 (NumPy's RandomState range)");
  c.random_seed = static_cast<std::uint32_t>(o.seed);
  if (!o.data_path.empty() && o.data_args_path)
    throw UsageError("--data-path and --data-args-path are mutually exclusive");
  if (whole_data_path(o) && per_split_paths(o))
    throw UsageError("--data-path cannot be combined with --train-data-path, --valid-data-path or "
                     "--test-data-path");
  if (!whole_data_path(o) && !per_split_paths(o))
    throw UsageError("--data-path (or --train-data-path, --valid-data-path, --test-data-path) is "
                     "required; mgt-index does not build Megatron's mock data");
  if (whole_data_path(o)) {
    // Megatron's arguments.py fills in the legacy default for --data-path only.
    if (!o.split && o.data_args_path) throw UsageError("--split is required with --data-args-path");
    c.split = o.split ? *o.split : std::string(kDefaultSplit);
    c.split_matrix = split_matrix(parse_split(*c.split));
  } else if (o.split) {
    throw UsageError("--split applies to --data-path, not to per-split data paths");
  }
  if (!(o.mid_level_dataset_surplus >= 0.0))
    throw UsageError("--mid-level-dataset-surplus must not be negative");
  c.mid_level_dataset_surplus = o.mid_level_dataset_surplus;
  c.path_to_cache = o.data_cache_path;
  c.tokenizer = tokenizer_identity(tokenizer);
  return c;
}

namespace {

using Bounds = std::array<std::optional<std::pair<double, double>>, 3>;
using Sizes = std::array<std::optional<std::int64_t>, 3>;

// _build_megatron_dataset_splits: one prefix cut into the splits whose bounds are given.
std::array<std::optional<GptDatasetIndex>, 3> build_prefix_splits(const std::string& prefix,
                                                                  const Bounds& bounds,
                                                                  const Sizes& sizes,
                                                                  const GptDatasetConfig& config) {
  auto dataset = std::make_shared<const IndexedDataset>(prefix);
  std::array<std::optional<GptDatasetIndex>, 3> out;
  for (Split s : kAllSplits) {
    auto i = static_cast<std::size_t>(s);
    if (!bounds[i]) continue;
    auto range = split_range(*bounds[i], dataset->sequence_count());
    out[i] = build_gpt_dataset_index(dataset, prefix, range, sizes[i], s, config);
  }
  return out;
}

// A blend of several prefixes for the splits with bounds (the multi-dataset branches of
// BlendedMegatronDatasetBuilder).
void build_blend(const Blend& blend, const Bounds& bounds, const std::array<std::int64_t, 3>& requested,
                 const GptDatasetConfig& config, IndexResult& result) {
  std::optional<std::vector<double>> weights;
  if (blend.weights) weights = numpy_normalize(*blend.weights);
  std::size_t n = blend.prefixes.size();
  // Per prefix and split: samples planned (target) and built (with the surplus).
  std::vector<Sizes> target(n), buffer(n);
  if (weights) {
    for (Split s : kAllSplits) {
      auto i = static_cast<std::size_t>(s);
      auto t = dataset_budgets(*weights, requested[i], 0.0);
      auto b = dataset_budgets(*weights, requested[i], config.mid_level_dataset_surplus);
      for (std::size_t d = 0; d < n; ++d) {
        target[d][i] = t[d];
        buffer[d][i] = b[d];
      }
    }
  }
  std::vector<std::array<std::optional<GptDatasetIndex>, 3>> members;
  for (std::size_t d = 0; d < n; ++d)
    members.push_back(build_prefix_splits(blend.prefixes[d], bounds, buffer[d], config));

  for (Split s : kAllSplits) {
    auto i = static_cast<std::size_t>(s);
    if (!bounds[i]) continue;
    SplitIndices split;
    split.split = s;
    split.requested = requested[i];
    std::vector<const GptDatasetIndex*> pointers;
    for (auto& m : members) split.datasets.push_back(*m[i]);
    for (auto& d : split.datasets) pointers.push_back(&d);
    std::vector<double> w;
    std::int64_t size = 0;
    if (weights) {
      w = *weights;
      for (std::size_t d = 0; d < n; ++d) size += *target[d][i];
    } else {
      std::int64_t total = 0;
      for (auto& d : split.datasets) {
        w.push_back(static_cast<double>(d.size()));
        total += static_cast<std::int64_t>(d.size());
      }
      size = std::min(requested[i], total);
    }
    split.blend = build_blended_dataset_index(pointers, w, size, config);
    result.splits[i] = std::move(split);
  }
}

}  // namespace

IndexResult build_indices(const IndexOptions& options, const Tokenizer& tokenizer) {
  IndexResult result;
  result.config = dataset_config(options, tokenizer);
  const GptDatasetConfig& config = result.config;
  auto requested = requested_samples(options);

  if (whole_data_path(options)) {
    Blend blend = parse_blend(data_path_items(options),
                              options.data_args_path ? "--data-args-path" : "--data-path");
    const SplitMatrix& matrix = *config.split_matrix;
    if (blend.prefixes.size() == 1 && !blend.weights) {
      Sizes sizes = {requested[0], requested[1], requested[2]};
      auto built = build_prefix_splits(blend.prefixes[0], matrix, sizes, config);
      for (Split s : kAllSplits) {
        auto i = static_cast<std::size_t>(s);
        if (!built[i]) continue;
        SplitIndices split;
        split.split = s;
        split.requested = requested[i];
        split.datasets.push_back(std::move(*built[i]));
        result.splits[i] = std::move(split);
      }
    } else {
      build_blend(blend, matrix, requested, config, result);
    }
    return result;
  }

  // Per-split data paths: each split from its own blend, over the whole of each dataset.
  const std::array<const std::vector<std::string>*, 3> paths = {
      &options.train_data_path, &options.valid_data_path, &options.test_data_path};
  const std::array<const char*, 3> flags = {"--train-data-path", "--valid-data-path", "--test-data-path"};
  for (Split s : kAllSplits) {
    auto i = static_cast<std::size_t>(s);
    if (paths[i]->empty()) continue;
    Blend blend = parse_blend(*paths[i], flags[i]);
    Bounds bounds;
    bounds[i] = std::make_pair(0.0, 1.0);
    std::array<std::int64_t, 3> spoofed = {0, 0, 0};
    spoofed[i] = requested[i];
    if (blend.prefixes.size() == 1) {
      Sizes sizes;
      sizes[i] = requested[i];
      auto built = build_prefix_splits(blend.prefixes[0], bounds, sizes, config);
      SplitIndices split;
      split.split = s;
      split.requested = requested[i];
      split.datasets.push_back(std::move(*built[i]));
      result.splits[i] = std::move(split);
    } else {
      IndexResult partial;
      build_blend(blend, bounds, spoofed, config, partial);
      result.splits[i] = std::move(partial.splits[i]);
    }
  }
  return result;
}

namespace {

PyValue files_value(const std::vector<std::string>& files) {
  PyValue v = PyValue::list();
  for (const auto& f : files) v.append(PyValue::string(f));
  return v;
}

}  // namespace

std::string index_summary_json(const IndexResult& result) {
  const auto& c = result.config;
  PyValue config = PyValue::dict();
  config.set("random_seed", PyValue::integer(c.random_seed));
  config.set("sequence_length", PyValue::integer(c.sequence_length));
  config.set("split", PyValue::string_or_none(c.split));
  config.set("split_matrix", c.split_matrix ? split_matrix_value(*c.split_matrix) : PyValue::none());
  config.set("data_cache_path", PyValue::string_or_none(c.path_to_cache));
  config.set("tokenizer", c.tokenizer.to_value());

  PyValue splits = PyValue::dict();
  for (Split s : kAllSplits) {
    const auto& entry = result.splits[static_cast<std::size_t>(s)];
    if (!entry) {
      splits.set(split_name(s), PyValue::none());
      continue;
    }
    PyValue datasets = PyValue::list();
    for (const auto& d : entry->datasets) {
      PyValue v = PyValue::dict();
      v.set("prefix", PyValue::string(d.dataset_path));
      v.set("sequence_range", PyValue::list({PyValue::integer(d.sequence_range.first),
                                             PyValue::integer(d.sequence_range.second)}));
      v.set("sequences", PyValue::integer(d.sequence_range.second - d.sequence_range.first));
      v.set("tokens", PyValue::integer(d.tokens_per_epoch));
      v.set("epochs", PyValue::integer(d.num_epochs));
      v.set("separate_final_epoch", PyValue::boolean(d.separate_final_epoch));
      v.set("num_samples", d.num_samples ? PyValue::integer(*d.num_samples) : PyValue::none());
      v.set("samples", PyValue::integer(static_cast<std::int64_t>(d.size())));
      v.set("hash", PyValue::string(d.hash));
      v.set("cache_hit", PyValue::boolean(d.loaded_from_cache));
      v.set("files", files_value(d.cache_files));
      datasets.append(std::move(v));
    }
    PyValue blend = PyValue::none();
    if (entry->blend) {
      const auto& b = *entry->blend;
      blend = PyValue::dict();
      PyValue weights = PyValue::list();
      for (double w : b.weights) weights.append(PyValue::real(w));
      blend.set("weights", std::move(weights));
      blend.set("size", PyValue::integer(static_cast<std::int64_t>(b.size())));
      blend.set("hash", PyValue::string(b.hash));
      blend.set("cache_hit", PyValue::boolean(b.loaded_from_cache));
      blend.set("files", files_value(b.cache_files));
    }
    PyValue v = PyValue::dict();
    v.set("requested", PyValue::integer(entry->requested));
    v.set("samples", PyValue::integer(static_cast<std::int64_t>(entry->size())));
    v.set("blend", std::move(blend));
    v.set("datasets", std::move(datasets));
    splits.set(split_name(s), std::move(v));
  }
  PyValue root = PyValue::dict();
  root.set("config", std::move(config));
  root.set("splits", std::move(splits));
  return root.dumps() + "\n";
}

std::string index_summary_table(const IndexResult& result) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-6s %-40s %17s %12s %7s %10s %10s  %s\n", "split", "dataset",
                "sequences", "tokens", "epochs", "requested", "built", "cache");
  out += line;
  for (Split s : kAllSplits) {
    const auto& entry = result.splits[static_cast<std::size_t>(s)];
    if (!entry) {
      std::snprintf(line, sizeof line, "%-6s (empty split, not built)\n", split_name(s));
      out += line;
      continue;
    }
    for (const auto& d : entry->datasets) {
      std::string range = std::to_string(d.sequence_range.first) + ".." + std::to_string(d.sequence_range.second);
      std::string requested = d.num_samples ? std::to_string(*d.num_samples) : "epoch";
      std::snprintf(line, sizeof line, "%-6s %-40s %17s %12lld %7lld %10s %10zu  %s\n", split_name(s),
                    d.dataset_path.c_str(), range.c_str(), static_cast<long long>(d.tokens_per_epoch),
                    static_cast<long long>(d.num_epochs), requested.c_str(), d.size(),
                    d.loaded_from_cache ? "loaded" : "built");
      out += line;
    }
    if (entry->blend) {
      const auto& b = *entry->blend;
      std::string cache = b.cache_files.empty() ? "not cached" : b.loaded_from_cache ? "loaded" : "built";
      std::snprintf(line, sizeof line, "%-6s %-40s %17s %12s %7s %10lld %10zu  %s\n", split_name(s),
                    "(blend)", "", "", "", static_cast<long long>(entry->requested), b.size(),
                    cache.c_str());
      out += line;
    }
  }
  if (result.config.path_to_cache) out += "cache: " + *result.config.path_to_cache + "\n";
  return out;
}

void dump_samples(const IndexResult& result, const GptSampleOptions& sample_options,
                  std::int64_t count, const std::string& path) {
  AtomicFile out(path);
  auto ints = [](const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  for (Split s : kAllSplits) {
    const auto& entry = result.splits[static_cast<std::size_t>(s)];
    if (!entry) continue;
    SplitSampleReader reader(entry->datasets, entry->blend, sample_options);
    std::size_t n = std::min(static_cast<std::size_t>(count), reader.size());
    for (std::size_t i = 0; i < n; ++i) {
      GptSample sample = reader.get(i);
      std::string mask = "[";
      for (std::size_t k = 0; k < sample.loss_mask.size(); ++k)
        mask += (k ? ", " : "") + json_float(sample.loss_mask[k]);
      mask += "]";
      out.write("{\"split\": \"" + std::string(split_name(s)) + "\", \"index\": " + std::to_string(i) +
                ", \"dataset_id\": " + std::to_string(sample.dataset_id) +
                ", \"tokens\": " + ints(sample.tokens) + ", \"labels\": " + ints(sample.labels) +
                ", \"loss_mask\": " + mask + ", \"position_ids\": " + ints(sample.position_ids) +
                ", \"segment_starts\": " + ints(sample.segment_starts) + "}\n");
    }
  }
  out.commit();
}

int run_index(const IndexOptions& options) {
  if (options.dump_count < 0) throw UsageError("--dump-count must not be negative");
  auto tokenizer = make_tokenizer(options.tokenizer);
  IndexResult result = build_indices(options, *tokenizer);
  if (options.dump_samples_path) {
    GptSampleOptions sample_options;
    sample_options.sequence_length = result.config.sequence_length;
    sample_options.add_extra_token_to_sequence = result.config.add_extra_token_to_sequence;
    sample_options.eod = tokenizer->eod();
    sample_options.pad = tokenizer->pad() ? *tokenizer->pad() : -1;
    sample_options.eod_mask_loss = options.eod_mask_loss;
    sample_options.reset_position_ids = options.reset_position_ids;
    sample_options.reset_attention_mask = options.reset_attention_mask;
    dump_samples(result, sample_options, options.dump_count, *options.dump_samples_path);
  }
  std::cerr << index_summary_table(result);
  std::cerr.flush();
  std::cout << index_summary_json(result);
  std::cout.flush();
  if (!std::cout) throw Error("cannot write the summary to standard output");
  return kExitOk;
}

}  // namespace mgt
