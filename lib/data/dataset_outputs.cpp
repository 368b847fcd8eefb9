#include "data/dataset_outputs.hpp"

#include <unistd.h>

#include "core/error.hpp"
#include "core/temporary_file.hpp"

namespace mgt {

struct DatasetOutputs::KeyOutput {
  std::string prefix;
  // One writer per partition; with one partition it writes the final dataset directly.
  std::vector<std::unique_ptr<IndexedDatasetWriter>> parts;
  std::vector<std::string> part_prefixes;  // committed partition datasets, removed at the end
  std::unique_ptr<IndexedDatasetWriter> merged;
  std::uint64_t next_document = 0;

  ~KeyOutput() {
    merged.reset();
    parts.clear();
    for (const auto& p : part_prefixes) {
      ::unlink(bin_path(p).c_str());
      ::unlink(idx_path(p).c_str());
    }
  }
  IndexedDatasetWriter& final_writer() { return merged ? *merged : *parts.front(); }
};

DatasetOutputs::DatasetOutputs(std::vector<std::string> prefixes, DType dtype, std::size_t partitions)
    : dtype_(dtype), partitions_(partitions == 0 ? 1 : partitions) {
  for (auto& prefix : prefixes) {
    auto out = std::make_unique<KeyOutput>();
    out->prefix = std::move(prefix);
    if (partitions_ == 1) {
      out->parts.push_back(std::make_unique<IndexedDatasetWriter>(out->prefix, dtype_));
    } else {
      for (std::size_t p = 0; p < partitions_; ++p) {
        // Unpredictable names: the partitions are renamed into place before they are merged.
        std::string part = out->prefix + ".partition" + std::to_string(p) + ".tmp." + random_name_suffix();
        out->parts.push_back(std::make_unique<IndexedDatasetWriter>(part, dtype_));
      }
    }
    keys_.push_back(std::move(out));
  }
}

DatasetOutputs::~DatasetOutputs() = default;

void DatasetOutputs::add_document(std::size_t k, std::span<const TokenId> tokens,
                                  std::span<const std::int32_t> lengths) {
  auto& out = *keys_.at(k);
  out.parts[out.next_document++ % out.parts.size()]->add_document(tokens, lengths);
}

const IndexedDatasetWriter& DatasetOutputs::writer(std::size_t k) const {
  return keys_.at(k)->final_writer();
}

void DatasetOutputs::commit() {
  for (auto& out : keys_) {
    if (out->parts.size() == 1) {
      out->parts.front()->finish();
      continue;
    }
    // Partitions become datasets of their own so they can be appended like Megatron's add_index.
    out->merged = std::make_unique<IndexedDatasetWriter>(out->prefix, dtype_);
    for (auto& part : out->parts) {
      out->part_prefixes.push_back(part->prefix());
      part->commit();
      out->merged->add_index(IndexedDataset(part->prefix()));
    }
    out->parts.clear();
    out->merged->finish();
  }
  // Renaming rarely fails; if it does, take back the datasets already renamed so that a failed
  // run leaves no partial set of outputs.
  std::size_t committed = 0;
  try {
    for (; committed < keys_.size(); ++committed) keys_[committed]->final_writer().commit();
  } catch (...) {
    for (std::size_t k = 0; k < committed; ++k) {
      ::unlink(bin_path(keys_[k]->prefix).c_str());
      ::unlink(idx_path(keys_[k]->prefix).c_str());
    }
    throw;
  }
}

}  // namespace mgt
