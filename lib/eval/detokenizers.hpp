// The detokenizers of Megatron's zero-shot evaluation (v0.13 tasks/zeroshot_gpt/detokenizer.py):
// they undo the word-level tokenization of WikiText and PTB ("a @-@ b", "word ,") so that the
// model sees text as it was trained on, before the whole file is tokenized for perplexity.
// Each is a fixed sequence of passes over the whole text, as the Python original: str.replace
// (left to right, non-overlapping) and a few regular expressions, reproduced by hand.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace mgt {

enum class DetokenizerKind { kPtb, kWikitext, kLambada };

// Megatron's dictionary key: "ptb", "wiki", "lambada".
std::string_view to_string(DetokenizerKind kind);

// get_detokenizer(path): the first key, in the order ptb, wiki, lambada, that occurs anywhere
// in the path as given (directories included); none when no key occurs.
std::optional<DetokenizerKind> detokenizer_for_path(std::string_view path);

std::string wikitext_detokenize(std::string_view text);
std::string ptb_detokenize(std::string_view text);
// Megatron's lambada_detokenizer returns its input.
std::string lambada_detokenize(std::string_view text);

std::string detokenize(DetokenizerKind kind, std::string_view text);

}  // namespace mgt
