#include "data/document_encoder.hpp"

#include <limits>

#include "core/error.hpp"

namespace mgt {

DocumentEncoder::DocumentEncoder(const Tokenizer& tokenizer, const EncoderSettings& settings)
    : settings_(settings),
      tokenizer_(tokenizer.clone()),
      parser_(settings.json_keys),
      eod_(tokenizer.eod()) {
  if (settings_.split_sentences) splitter_ = std::make_unique<SentenceSplitter>(settings_.keep_newlines);
}

DocumentEncoder::~DocumentEncoder() = default;

void DocumentEncoder::encode(std::string_view json_line, std::span<EncodedDocuments> out) {
  parser_.parse(json_line);
  marks_.clear();
  for (auto& o : out)
    marks_.push_back({o.tokens.size(), o.sequence_lengths.size(), o.document_sequences.size()});
  try {
    for (std::size_t k = 0; k < out.size(); ++k) encode_key(k, out[k]);
  } catch (...) {
    for (std::size_t k = 0; k < out.size(); ++k) {
      out[k].tokens.resize(marks_[k].tokens);
      out[k].sequence_lengths.resize(marks_[k].lengths);
      out[k].document_sequences.resize(marks_[k].documents);
    }
    throw;
  }
}

void DocumentEncoder::encode_key(std::size_t k, EncodedDocuments& out) {
  std::uint32_t sequences = 0;
  auto add_sentence = [&](std::string_view sentence) {
    std::size_t before = out.tokens.size();
    tokenizer_->tokenize(sentence, out.tokens);
    std::size_t count = out.tokens.size() - before;
    if (count == 0) return;  // Megatron drops sentences without ids
    if (count > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      throw Error("key '" + settings_.json_keys[k] + "': a sequence of " + std::to_string(count) +
                  " tokens does not fit the index's int32 length");
    out.sequence_lengths.push_back(static_cast<std::int32_t>(count));
    ++sequences;
  };
  auto texts = parser_.texts(k);
  if (settings_.split_sentences && !parser_.is_list(k)) {
    // A list is taken as already split, as Megatron's second pass over its "_ss" file does.
    for (const std::string& sentence : splitter_->split(texts.front())) add_sentence(sentence);
  } else {
    for (std::string_view text : texts) add_sentence(text);
  }
  if (sequences > 0 && settings_.append_eod) {
    if (out.sequence_lengths.back() == std::numeric_limits<std::int32_t>::max())
      throw Error("key '" + settings_.json_keys[k] + "': sequence too long for the EOD token");
    out.tokens.push_back(eod_);
    ++out.sequence_lengths.back();
  }
  out.document_sequences.push_back(sequences);
}

}  // namespace mgt
