#include "eval/detokenizers.hpp"

#include <array>
#include <utility>

#include "eval/python_text.hpp"

namespace mgt {

namespace {

// str.replace(from, to).
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  for (std::size_t pos = text.find(from); pos != std::string_view::npos; pos = text.find(from, done)) {
    out.append(text.substr(done, pos - done));
    out.append(to);
    done = pos + from.size();
  }
  out.append(text.substr(done));
  return out;
}

// re.sub(r"/' [0-9]/", r"/'[0-9]/", text): the pattern is written with slashes as delimiters
// that Python takes literally, and the replacement's "[0-9]" is literal text too, so it only
// rewrites the rare "/' 7/" into "/'[0-9]/". Kept because Megatron has it.
std::string replace_slash_quote_digit(std::string_view text) {
  constexpr std::string_view kOpen = "/' ";
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  for (std::size_t pos = text.find(kOpen); pos != std::string_view::npos; pos = text.find(kOpen, pos + 1)) {
    if (pos < done) continue;
    const std::size_t digit = pos + kOpen.size();
    if (digit + 1 < text.size() && text[digit] >= '0' && text[digit] <= '9' && text[digit + 1] == '/') {
      out.append(text.substr(done, pos - done));
      out.append("/'[0-9]/");
      done = digit + 2;
    }
  }
  out.append(text.substr(done));
  return out;
}

// re.sub(r"O\s*([^C]*?)\s*C", r"O\1C", text) for the bracket pair (O, C): each O is matched with
// the first C after it (the group cannot contain C), and the whitespace just inside is removed.
// The regex scan resumes after the C, and an O without a later C matches nothing.
std::string strip_inside_brackets(std::string_view text, char open, char close) {
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  for (std::size_t pos = text.find(open); pos != std::string_view::npos; pos = text.find(open, done)) {
    const std::size_t end = text.find(close, pos + 1);
    if (end == std::string_view::npos) break;
    out.append(text.substr(done, pos - done));
    out += open;
    out.append(python_text::strip(text.substr(pos + 1, end - pos - 1)));
    out += close;
    done = end + 1;
  }
  out.append(text.substr(done));
  return out;
}

}  // namespace

std::string_view to_string(DetokenizerKind kind) {
  switch (kind) {
    case DetokenizerKind::kPtb: return "ptb";
    case DetokenizerKind::kWikitext: return "wiki";
    case DetokenizerKind::kLambada: return "lambada";
  }
  return "?";
}

std::optional<DetokenizerKind> detokenizer_for_path(std::string_view path) {
  for (DetokenizerKind kind : {DetokenizerKind::kPtb, DetokenizerKind::kWikitext, DetokenizerKind::kLambada})
    if (path.find(to_string(kind)) != std::string_view::npos) return kind;
  return std::nullopt;
}

std::string wikitext_detokenize(std::string_view text) {
  // contractions
  std::string s = replace_all(text, "s '", "s'");
  s = replace_slash_quote_digit(s);
  // number separators
  s = replace_all(s, " @-@ ", "-");
  s = replace_all(s, " @,@ ", ",");
  s = replace_all(s, " @.@ ", ".");
  // punctuation
  constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kPunctuation = {{
      {" : ", ": "}, {" ; ", "; "}, {" . ", ". "}, {" ! ", "! "}, {" ? ", "? "}, {" , ", ", "}}};
  for (const auto& [from, to] : kPunctuation) s = replace_all(s, from, to);
  // brackets and quotes
  s = strip_inside_brackets(s, '(', ')');
  s = strip_inside_brackets(s, '[', ']');
  s = strip_inside_brackets(s, '{', '}');
  s = strip_inside_brackets(s, '"', '"');
  s = strip_inside_brackets(s, '\'', '\'');
  // miscellaneous
  s = replace_all(s, "= = = =", "====");
  s = replace_all(s, "= = =", "===");
  s = replace_all(s, "= =", "==");
  s = replace_all(s, " \u00B0 ", "\u00B0");  // chr(176), the degree sign
  s = replace_all(s, " \n", "\n");
  s = replace_all(s, "\n ", "\n");
  s = replace_all(s, " N ", " 1 ");
  s = replace_all(s, " 's", "'s");
  return s;
}

std::string ptb_detokenize(std::string_view text) {
  std::string s = replace_all(text, " '", "'");
  s = replace_all(s, " \n", "\n");
  s = replace_all(s, "\n ", "\n");
  s = replace_all(s, " n't", "n't");
  s = replace_all(s, " N ", "1 ");
  s = replace_all(s, "$ 1", "$1");
  s = replace_all(s, "# 1", "#1");
  return s;
}

std::string lambada_detokenize(std::string_view text) { return std::string(text); }

std::string detokenize(DetokenizerKind kind, std::string_view text) {
  switch (kind) {
    case DetokenizerKind::kPtb: return ptb_detokenize(text);
    case DetokenizerKind::kWikitext: return wikitext_detokenize(text);
    case DetokenizerKind::kLambada: return lambada_detokenize(text);
  }
  return std::string(text);
}

}  // namespace mgt
