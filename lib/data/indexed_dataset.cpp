#include "data/indexed_dataset.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.hpp"

namespace mgt {

// ---------------------------------------------------------------------------------------------
// Reader

template <typename T>
T IndexedDataset::field(std::size_t offset) const {
  T value;
  std::memcpy(&value, idx_.data() + offset, sizeof(T));  // fields are unaligned in the file
  return value;
}

IndexedDataset::IndexedDataset(const std::string& prefix)
    : prefix_(prefix), idx_(idx_path(prefix)), bin_(bin_path(prefix)) {
  const std::string& ip = idx_.path();
  auto fail = [&](const std::string& what) { throw Error(ip + ": " + what); };
  if (idx_.size() < kIndexHeaderSize)
    fail("truncated index (" + std::to_string(idx_.size()) + " bytes, the header alone is 34)");
  if (std::memcmp(idx_.data(), kIndexMagic, sizeof kIndexMagic) != 0)
    fail("not a Megatron indexed dataset (bad magic)");
  auto version = field<std::uint64_t>(9);
  if (version != 1) fail("unsupported index version " + std::to_string(version) + " (expected 1)");
  auto dtype = dtype_from_code(idx_.data()[17]);
  if (!dtype) fail("unknown dtype code " + std::to_string(idx_.data()[17]));
  dtype_ = *dtype;
  if (!dtype_is_integer(dtype_)) fail("token dtype " + dtype_name(dtype_) + " is not an integer type");
  auto n = field<std::uint64_t>(18);
  auto d = field<std::uint64_t>(26);
  // Bound the counts before multiplying so a corrupt header cannot overflow the size check.
  if (n > idx_.size() || d > idx_.size() || d == 0)
    fail("corrupt header (sequence count " + std::to_string(n) + ", document index count " +
         std::to_string(d) + ")");
  std::uint64_t expected = kIndexHeaderSize + 12 * n + 8 * d;
  if (idx_.size() != expected)
    fail("size " + std::to_string(idx_.size()) + " bytes does not match its header (" +
         std::to_string(n) + " sequences, " + std::to_string(d - 1) + " documents: expected " +
         std::to_string(expected) + " bytes)");
  sequence_count_ = n;
  document_index_count_ = d;
  lengths_offset_ = kIndexHeaderSize;
  pointers_offset_ = lengths_offset_ + 4 * n;
  documents_offset_ = pointers_offset_ + 8 * n;

  const std::size_t item = dtype_size(dtype_);
  std::uint64_t tokens = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto len = sequence_length(i);
    if (len < 0) fail("negative length of sequence " + std::to_string(i));
    if (static_cast<std::uint64_t>(sequence_pointer(i)) != tokens * item)
      fail("pointer of sequence " + std::to_string(i) + " is inconsistent with the lengths");
    tokens += static_cast<std::uint64_t>(len);
  }
  token_count_ = tokens;
  if (document_index(0) != 0) fail("document index does not start at 0");
  for (std::size_t i = 1; i < d; ++i)
    if (document_index(i) < document_index(i - 1))
      fail("document index decreases at document " + std::to_string(i - 1));
  if (static_cast<std::uint64_t>(document_index(d - 1)) != n)
    fail("last document index " + std::to_string(document_index(d - 1)) +
         " is not the sequence count " + std::to_string(n));
  if (bin_.size() != tokens * item)
    throw Error(bin_.path() + ": " + std::to_string(bin_.size()) + " bytes, but " + ip +
                " describes " + std::to_string(tokens) + " " + dtype_name(dtype_) + " tokens (" +
                std::to_string(tokens * item) + " bytes)" +
                (bin_.size() < tokens * item ? ": the .bin is truncated" : ""));
}

std::int32_t IndexedDataset::sequence_length(std::size_t i) const {
  return field<std::int32_t>(lengths_offset_ + 4 * i);
}
std::int64_t IndexedDataset::sequence_pointer(std::size_t i) const {
  return field<std::int64_t>(pointers_offset_ + 8 * i);
}
std::int64_t IndexedDataset::document_index(std::size_t i) const {
  return field<std::int64_t>(documents_offset_ + 8 * i);
}

std::vector<std::int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<std::int32_t> out(sequence_count_);
  if (!out.empty()) std::memcpy(out.data(), idx_.data() + lengths_offset_, 4 * out.size());
  return out;
}

namespace {
template <typename T>
void widen(const std::uint8_t* src, std::size_t count, std::int64_t* out) {
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = static_cast<std::int64_t>(v);
  }
}
}  // namespace

void IndexedDataset::read(std::size_t sequence, std::size_t offset, std::size_t length,
                          std::int64_t* out) const {
  if (sequence >= sequence_count_)
    throw Error(idx_.path() + ": sequence " + std::to_string(sequence) + " out of range (" +
                std::to_string(sequence_count_) + " sequences)");
  auto len = static_cast<std::size_t>(sequence_length(sequence));
  if (offset > len || length > len - offset)
    throw Error(idx_.path() + ": read of tokens [" + std::to_string(offset) + ", " +
                std::to_string(offset + length) + ") past the end of sequence " +
                std::to_string(sequence) + " (" + std::to_string(len) + " tokens)");
  const std::uint8_t* src =
      bin_.data() + sequence_pointer(sequence) + offset * dtype_size(dtype_);
  switch (dtype_) {
    case DType::UInt8: widen<std::uint8_t>(src, length, out); break;
    case DType::Int8: widen<std::int8_t>(src, length, out); break;
    case DType::Int16: widen<std::int16_t>(src, length, out); break;
    case DType::UInt16: widen<std::uint16_t>(src, length, out); break;
    case DType::Int32: widen<std::int32_t>(src, length, out); break;
    case DType::Int64: widen<std::int64_t>(src, length, out); break;
    default: throw Error(idx_.path() + ": not an integer dataset");
  }
}

std::vector<std::int64_t> IndexedDataset::read(std::size_t sequence) const {
  std::vector<std::int64_t> out(
      sequence < sequence_count_ ? static_cast<std::size_t>(sequence_length(sequence)) : 0);
  read(sequence, 0, out.size(), out.data());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, DType dtype)
    : prefix_(std::move(prefix)),
      dtype_(dtype),
      bin_(std::make_unique<AtomicFile>(bin_path(prefix_))),
      lengths_(parent_directory(prefix_)),
      documents_(parent_directory(prefix_)) {
  if (dtype_ != DType::UInt16 && dtype_ != DType::Int32 && dtype_ != DType::Int64)
    throw Error("cannot write token dtype " + dtype_name(dtype_) + " (use uint16, int32 or int64)");
}

IndexedDatasetWriter::~IndexedDatasetWriter() = default;

void IndexedDatasetWriter::append_tokens(std::span<const TokenId> tokens) {
  if (tokens.empty()) return;
  switch (dtype_) {
    case DType::Int32:
      bin_->write(tokens.data(), tokens.size_bytes());
      break;
    case DType::UInt16: {
      convert_buffer_.resize(tokens.size() * 2);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] > 0xFFFF)
          throw Error("token id " + std::to_string(tokens[i]) + " does not fit the uint16 dtype of " +
                      bin_->path());
        auto v = static_cast<std::uint16_t>(tokens[i]);
        std::memcpy(convert_buffer_.data() + 2 * i, &v, 2);
      }
      bin_->write(convert_buffer_.data(), convert_buffer_.size());
      break;
    }
    case DType::Int64: {
      convert_buffer_.resize(tokens.size() * 8);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::int64_t v = tokens[i];
        std::memcpy(convert_buffer_.data() + 8 * i, &v, 8);
      }
      bin_->write(convert_buffer_.data(), convert_buffer_.size());
      break;
    }
    default:
      throw Error("unsupported dtype " + dtype_name(dtype_));
  }
  token_count_ += tokens.size();
}

void IndexedDatasetWriter::add_document(std::span<const TokenId> tokens,
                                        std::span<const std::int32_t> lengths) {
  std::uint64_t total = 0;
  for (auto len : lengths) total += static_cast<std::uint64_t>(len);
  if (total != tokens.size())
    throw Error("internal error: sequence lengths do not sum to the document's token count");
  append_tokens(tokens);
  lengths_.append(lengths.data(), lengths.size_bytes());
  sequence_count_ += lengths.size();
  std::int64_t end = static_cast<std::int64_t>(sequence_count_);
  documents_.append(&end, sizeof end);
  ++document_count_;
}

void IndexedDatasetWriter::add_index(const IndexedDataset& other, const std::function<void()>& between_chunks) {
  if (other.dtype() != dtype_)
    throw Error("cannot merge " + other.prefix() + " (dtype " + dtype_name(other.dtype()) +
                ") into a dataset of dtype " + dtype_name(dtype_));
  auto bytes = other.bin_bytes();
  constexpr std::size_t kChunk = std::size_t{64} << 20;
  for (std::size_t at = 0; at < bytes.size(); at += kChunk) {
    if (at > 0 && between_chunks) between_chunks();
    bin_->write(bytes.data() + at, std::min(kChunk, bytes.size() - at));
  }
  token_count_ += other.token_count();
  auto lengths = other.sequence_lengths();
  lengths_.append(lengths.data(), lengths.size() * sizeof(std::int32_t));
  for (std::size_t i = 1; i <= other.document_count(); ++i) {
    std::int64_t end = static_cast<std::int64_t>(sequence_count_) + other.document_index(i);
    documents_.append(&end, sizeof end);
  }
  sequence_count_ += other.sequence_count();
  document_count_ += other.document_count();
}

void IndexedDatasetWriter::finish() {
  if (finished_) return;
  idx_ = std::make_unique<AtomicFile>(idx_path(prefix_));
  idx_->write(kIndexMagic, sizeof kIndexMagic);
  std::uint64_t version = 1;
  idx_->write(&version, 8);
  auto code = static_cast<std::uint8_t>(dtype_);
  idx_->write(&code, 1);
  std::uint64_t n = sequence_count_, d = document_count_ + 1;
  idx_->write(&n, 8);
  idx_->write(&d, 8);

  // Stream the spilled arrays back in chunks: lengths, then pointers derived from them.
  constexpr std::size_t kChunk = 1 << 18;
  std::vector<std::int32_t> lengths(kChunk);
  for (std::uint64_t i = 0; i < n; i += kChunk) {
    std::size_t count = std::min<std::uint64_t>(kChunk, n - i);
    lengths_.read(i * 4, lengths.data(), count * 4);
    idx_->write(lengths.data(), count * 4);
  }
  std::vector<std::int64_t> pointers(kChunk);
  std::int64_t pointer = 0;
  const auto item = static_cast<std::int64_t>(dtype_size(dtype_));
  for (std::uint64_t i = 0; i < n; i += kChunk) {
    std::size_t count = std::min<std::uint64_t>(kChunk, n - i);
    lengths_.read(i * 4, lengths.data(), count * 4);
    for (std::size_t k = 0; k < count; ++k) {
      pointers[k] = pointer;
      pointer += static_cast<std::int64_t>(lengths[k]) * item;
    }
    idx_->write(pointers.data(), count * 8);
  }
  std::int64_t zero = 0;
  idx_->write(&zero, 8);
  for (std::uint64_t i = 0; i < document_count_; i += kChunk) {
    std::size_t count = std::min<std::uint64_t>(kChunk, document_count_ - i);
    documents_.read(i * 8, pointers.data(), count * 8);
    idx_->write(pointers.data(), count * 8);
  }
  finished_ = true;
}

void IndexedDatasetWriter::commit() {
  finish();
  bin_->commit();
  idx_->commit();
}

}  // namespace mgt
