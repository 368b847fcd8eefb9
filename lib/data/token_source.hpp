// Where a sample reader gets its tokens: the sequences of a dataset on disk or of Megatron's mock
// data, behind the two calls GPTDataset makes on its low-level dataset (a length, a slice).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "data/indexed_dataset.hpp"

namespace mgt {

class TokenSource {
public:
  virtual ~TokenSource() = default;

  virtual std::size_t sequence_count() const = 0;
  virtual std::int32_t sequence_length(std::size_t i) const = 0;
  // Tokens [offset, offset + length) of sequence i as int64; mgt::Error when out of bounds.
  virtual void read(std::size_t sequence, std::size_t offset, std::size_t length,
                    std::int64_t* out) const = 0;
};

// A dataset on disk as a token source.
class IndexedTokenSource final : public TokenSource {
public:
  explicit IndexedTokenSource(std::shared_ptr<const IndexedDataset> dataset)
      : dataset_(std::move(dataset)) {}

  std::size_t sequence_count() const override { return dataset_->sequence_count(); }
  std::int32_t sequence_length(std::size_t i) const override { return dataset_->sequence_length(i); }
  void read(std::size_t sequence, std::size_t offset, std::size_t length,
            std::int64_t* out) const override {
    dataset_->read(sequence, offset, length, out);
  }

private:
  std::shared_ptr<const IndexedDataset> dataset_;
};

}  // namespace mgt
