// Pre-tokenizers that cut text into the pieces BPE encodes: hand-written matchers for the regex
// patterns of the Llama 3 family (Llama 3, Qwen2, cl100k, Megatron's TikToken v1) and GPT-2,
// and ICU regex for any other pattern.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

// The patterns written
//   [CONTRACTIONS|][^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where CONTRACTIONS is (?i:'s|'t|'re|'ve|'m|'ll|'d) or absent, D is 1 or 3 (or unbounded), and
// possessive quantifiers (?+, ++) or \s*[\r\n] in place of \s*[\r\n]+ change nothing.
struct LlamaSplitPattern {
  bool contractions = true;   // case-insensitive 's 't 're 've 'm 'll 'd first
  std::size_t max_digits = 3;  // \p{N}{1,max_digits}; SIZE_MAX for \p{N}+
};

// The hand-written pattern that `pattern` spells, if any: a Llama 3-family pattern, or GPT-2's.
struct KnownSplitPattern {
  enum class Kind { kLlama, kGpt2 } kind;
  LlamaSplitPattern llama;
};
std::optional<KnownSplitPattern> recognize_split_pattern(std::string_view pattern);

// findall of a Llama 3-family pattern: calls emit(piece) for each match, in order; the matches
// cover the whole text.
void for_each_llama_piece(std::string_view text, const LlamaSplitPattern& pattern,
                          const std::function<void(std::string_view)>& emit);

// A regex pre-tokenizer for any pattern, with ICU. \s and \S mean Unicode White_Space, as in
// Python's `regex` and Oniguruma. Immutable and shareable; matching needs a Matcher per thread.
class IcuSplitRegex {
public:
  // Throws mgt::Error naming `what` when ICU cannot compile the pattern.
  IcuSplitRegex(std::string_view pattern, const std::string& what);
  ~IcuSplitRegex();

  class Matcher {
  public:
    explicit Matcher(const IcuSplitRegex& regex);
    ~Matcher();
    // Calls emit(begin, end, matched) for the matches and the gaps between them, in order, as
    // byte ranges of `text` (valid UTF-8 assumed; bytes that are not are treated as U+FFFD).
    void split(std::string_view text, const std::function<void(std::size_t, std::size_t, bool)>& emit);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt
