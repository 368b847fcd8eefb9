// Megatron's Encoder.encode for one JSON line (spec/megatron.md §2): per --json-keys key, the
// text (or list of sentences, or sentences from --split-sentences) becomes token ids; sentences
// without ids are dropped, and with --append-eod the EOD id ends the last sentence of a
// document that has any id. A document without ids is still a document.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/json_document.hpp"
#include "tokenizer/sentence_splitter.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// The documents of one key, back to back: what IndexedDatasetWriter::add_document takes.
struct EncodedDocuments {
  std::vector<TokenId> tokens;
  std::vector<std::int32_t> sequence_lengths;
  std::vector<std::uint32_t> document_sequences;  // sequences per document
  void clear() {
    tokens.clear();
    sequence_lengths.clear();
    document_sequences.clear();
  }
};

struct EncoderSettings {
  std::vector<std::string> json_keys{"text"};
  bool split_sentences = false;
  bool keep_newlines = false;
  bool append_eod = false;
};

// Not thread-safe: each worker thread owns one (with its own tokenizer clone and splitter).
class DocumentEncoder {
public:
  DocumentEncoder(const Tokenizer& tokenizer, const EncoderSettings& settings);
  ~DocumentEncoder();
  DocumentEncoder(const DocumentEncoder&) = delete;
  DocumentEncoder& operator=(const DocumentEncoder&) = delete;

  // Appends one document per key to out[k] (out.size() == number of keys). All or nothing: on a
  // bad line nothing is appended and an mgt::Error says what is wrong (without location).
  void encode(std::string_view json_line, std::span<EncodedDocuments> out);

  std::size_t key_count() const { return settings_.json_keys.size(); }

private:
  void encode_key(std::size_t k, EncodedDocuments& out);
  struct Mark {
    std::size_t tokens, lengths, documents;
  };
  EncoderSettings settings_;
  std::vector<Mark> marks_;  // sizes before the current line, to take it back on failure
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<SentenceSplitter> splitter_;
  JsonDocumentParser parser_;
  TokenId eod_;
};

}  // namespace mgt
