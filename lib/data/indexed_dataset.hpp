// Megatron's indexed dataset (.bin + .idx), byte for byte: reading with full validation and
// writing with bounded memory (spec/megatron.md §1).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/mapped_file.hpp"
#include "core/scratch_file.hpp"
#include "data/dtype.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr std::size_t kIndexHeaderSize = 34;

inline std::string idx_path(const std::string& prefix) { return prefix + ".idx"; }
inline std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }

// A read-only view of a dataset. The constructor checks every structural invariant, so later
// reads cannot go out of bounds; a bad file gives an mgt::Error naming it.
class IndexedDataset {
public:
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  DType dtype() const { return dtype_; }
  std::size_t sequence_count() const { return sequence_count_; }
  // Number of documents (len(document_indices) - 1).
  std::size_t document_count() const { return document_index_count_ - 1; }
  std::uint64_t token_count() const { return token_count_; }

  std::int32_t sequence_length(std::size_t i) const;
  std::int64_t sequence_pointer(std::size_t i) const;  // byte offset in .bin
  std::int64_t document_index(std::size_t i) const;    // i in [0, document_count()]
  std::vector<std::int32_t> sequence_lengths() const;

  // Tokens [offset, offset + length) of sequence i, converted to int64 (as Megatron reads them).
  void read(std::size_t sequence, std::size_t offset, std::size_t length, std::int64_t* out) const;
  std::vector<std::int64_t> read(std::size_t sequence) const;

  // Raw bytes of the whole .bin, for merging.
  std::span<const std::uint8_t> bin_bytes() const { return {bin_.data(), bin_.size()}; }

private:
  template <typename T>
  T field(std::size_t offset) const;
  std::string prefix_;
  MappedFile idx_;
  MappedFile bin_;
  DType dtype_ = DType::Int32;
  std::size_t sequence_count_ = 0;
  std::size_t document_index_count_ = 0;
  std::uint64_t token_count_ = 0;
  std::size_t lengths_offset_ = 0, pointers_offset_ = 0, documents_offset_ = 0;
};

// Writes PREFIX.bin and PREFIX.idx under temporary names; nothing appears under the final names
// until commit(). Memory stays constant: per-sequence arrays are spilled to scratch files.
class IndexedDatasetWriter {
public:
  IndexedDatasetWriter(std::string prefix, DType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One document made of sequences of the given lengths (which sum to tokens.size()).
  // An empty `lengths` still records a document, as Megatron's add_document does.
  void add_document(std::span<const TokenId> tokens, std::span<const std::int32_t> lengths);
  // Appends every document of another dataset (Megatron's add_index); dtypes must match.
  // between_chunks, when set, is called between chunks of the token copy, which for a large
  // dataset is long work: it may throw to abandon the copy.
  void add_index(const IndexedDataset& other, const std::function<void()>& between_chunks = {});

  // Completes both files under their temporary names (write .idx, fsync) ...
  void finish();
  // ... and renames them into place, .bin first so a visible .idx always has its .bin.
  void commit();
  void finalize() { finish(); commit(); }

  const std::string& prefix() const { return prefix_; }
  DType dtype() const { return dtype_; }
  std::uint64_t sequence_count() const { return sequence_count_; }
  std::uint64_t document_count() const { return document_count_; }
  std::uint64_t token_count() const { return token_count_; }
  std::uint64_t bin_bytes() const { return bin_->bytes_written(); }

private:
  void append_tokens(std::span<const TokenId> tokens);
  std::string prefix_;
  DType dtype_;
  std::unique_ptr<AtomicFile> bin_;
  std::unique_ptr<AtomicFile> idx_;
  ScratchFile lengths_;    // int32 per sequence
  ScratchFile documents_;  // int64 per document end (sequence count so far)
  std::uint64_t sequence_count_ = 0;
  std::uint64_t document_count_ = 0;
  std::uint64_t token_count_ = 0;
  std::vector<std::uint8_t> convert_buffer_;
  bool finished_ = false;
};

}  // namespace mgt
