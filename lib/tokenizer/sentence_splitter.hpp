// Sentence splitting for --split-sentences, in place of Megatron's NLTK punkt (English).
// ICU's sentence rules decide the boundaries; the output follows punkt's observable shape.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

class SentenceSplitter {
public:
  // keep_newlines mirrors Megatron's --keep-newlines: each sentence keeps the whitespace
  // (newlines included) that follows it, except the text's trailing whitespace and the
  // whitespace after a closing quote or bracket (punkt drops it when it realigns the mark).
  explicit SentenceSplitter(bool keep_newlines);
  ~SentenceSplitter();
  SentenceSplitter(SentenceSplitter&&) noexcept;
  SentenceSplitter& operator=(SentenceSplitter&&) noexcept;
  SentenceSplitter(const SentenceSplitter&) = delete;
  SentenceSplitter& operator=(const SentenceSplitter&) = delete;

  // A splitter with the same settings and its own break iterator (an instance is not
  // thread-safe; give each thread a clone).
  SentenceSplitter clone() const;

  // The sentences of `utf8_text`, in order, as slices of it: newlines inside a sentence stay,
  // whitespace between sentences is dropped (kept at each sentence's end with keep_newlines),
  // leading whitespace stays on the first sentence, trailing whitespace of the text is
  // dropped, and whitespace-only text gives no sentence. Like Megatron, the text is cut into
  // pieces of 1,000,000 code points that are split independently.
  std::vector<std::string> split(std::string_view utf8_text);

  bool keep_newlines() const { return keep_newlines_; }

private:
  struct Impl;
  SentenceSplitter(bool keep_newlines, std::unique_ptr<Impl> impl);

  bool keep_newlines_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt
