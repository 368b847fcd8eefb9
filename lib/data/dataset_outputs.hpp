// The output datasets of one mgt-tokenize run: one per JSON key, in the document order that
// Megatron's preprocess_data.py produces for the given --partitions. Nothing appears under a
// final name until commit() has been reached for all of them.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/dtype.hpp"
#include "data/indexed_dataset.hpp"

namespace mgt {

class DatasetOutputs {
public:
  // prefixes: the final PREFIX of each key's dataset. partitions > 1 (and not sequential)
  // reproduces Megatron's round-robin partitioning: document i goes to partition i % P and the
  // partitions are concatenated in order, through temporary datasets next to the output.
  DatasetOutputs(std::vector<std::string> prefixes, DType dtype, std::size_t partitions);
  ~DatasetOutputs();  // removes temporaries and, unless committed, every output
  DatasetOutputs(const DatasetOutputs&) = delete;
  DatasetOutputs& operator=(const DatasetOutputs&) = delete;

  // The next document of key k. Documents must come for every key in the same order.
  void add_document(std::size_t k, std::span<const TokenId> tokens,
                    std::span<const std::int32_t> lengths);

  // Completes every dataset under temporary names (merging partitions), then renames all into
  // place. Either step may throw; then no output is left.
  void commit();

  std::size_t key_count() const { return keys_.size(); }
  const IndexedDatasetWriter& writer(std::size_t k) const;

private:
  struct KeyOutput;
  std::vector<std::unique_ptr<KeyOutput>> keys_;
  DType dtype_;
  std::size_t partitions_;
};

}  // namespace mgt
