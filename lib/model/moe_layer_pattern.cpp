#include "model/moe_layer_pattern.hpp"

#include <cctype>
#include <string>
#include <variant>

#include "core/error.hpp"

namespace mgt {

namespace {

// A value of the expression: an integer or a list of integers, with Python's + and * on them
// (int + int, list + list, int * int, list * int, int * list).
using Value = std::variant<std::int64_t, std::vector<std::int64_t>>;

// Lists longer than this are refused: a pattern names one entry per layer.
constexpr std::int64_t kMaxLength = 1 << 20;

class PatternParser {
public:
  explicit PatternParser(std::string_view text) : text_(text) {}

  Value parse() {
    Value v = sum();
    skip_spaces();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UsageError("--moe-layer-freq: invalid pattern '" + std::string(text_) + "': " + what);
  }
  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool take(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Value sum() {
    Value left = product();
    while (take('+')) {
      Value right = product();
      if (left.index() != right.index()) fail("+ of a list and an integer");
      if (auto* l = std::get_if<std::vector<std::int64_t>>(&left)) {
        const auto& r = std::get<std::vector<std::int64_t>>(right);
        if (static_cast<std::int64_t>(l->size() + r.size()) > kMaxLength) fail("the list is too long");
        l->insert(l->end(), r.begin(), r.end());
      } else {
        const std::int64_t r = std::get<std::int64_t>(right);
        std::int64_t& l_int = std::get<std::int64_t>(left);
        if (__builtin_add_overflow(l_int, r, &l_int)) fail("integer overflow");
      }
    }
    return left;
  }

  Value product() {
    Value left = atom();
    while (take('*')) {
      Value right = atom();
      if (std::holds_alternative<std::vector<std::int64_t>>(left) &&
          std::holds_alternative<std::vector<std::int64_t>>(right))
        fail("* of two lists");
      if (std::holds_alternative<std::vector<std::int64_t>>(right)) std::swap(left, right);
      const std::int64_t times = std::get<std::int64_t>(right);
      if (auto* l = std::get_if<std::vector<std::int64_t>>(&left)) {
        // Python repeats a list 0 times for a count below 1.
        const std::int64_t n = times < 0 ? 0 : times;
        if (n != 0 && static_cast<std::int64_t>(l->size()) > kMaxLength / n) fail("the list is too long");
        std::vector<std::int64_t> repeated;
        for (std::int64_t k = 0; k < n; ++k) repeated.insert(repeated.end(), l->begin(), l->end());
        *l = std::move(repeated);
      } else {
        std::int64_t& l_int = std::get<std::int64_t>(left);
        if (__builtin_mul_overflow(l_int, times, &l_int)) fail("integer overflow");
      }
    }
    return left;
  }

  Value atom() {
    skip_spaces();
    if (take('(')) {
      Value v = sum();
      if (!take(')')) fail("expected ')'");
      return v;
    }
    if (take('[')) {
      std::vector<std::int64_t> list;
      if (take(']')) return list;
      do {
        if (take(']')) return list;  // a trailing comma
        Value item = sum();
        if (!std::holds_alternative<std::int64_t>(item)) fail("a list inside a list");
        list.push_back(std::get<std::int64_t>(item));
      } while (take(','));
      if (!take(']')) fail("expected ']'");
      return list;
    }
    skip_spaces();
    const std::size_t start = pos_;
    std::int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text_[pos_] - '0', &value))
        fail("integer overflow");
      ++pos_;
    }
    if (pos_ == start) fail(pos_ < text_.size() ? "unexpected '" + std::string(1, text_[pos_]) + "'" : "unexpected end");
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<bool> moe_layer_pattern(std::string_view text, std::int64_t num_layers) {
  std::vector<bool> pattern;
  if (text.find('[') == std::string_view::npos) {
    // Megatron's int(x): an optionally signed decimal integer.
    std::string_view digits = text;
    while (!digits.empty() && digits.front() == ' ') digits.remove_prefix(1);
    while (!digits.empty() && digits.back() == ' ') digits.remove_suffix(1);
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    std::int64_t every = 0;
    bool ok = !digits.empty() && digits.size() <= 18;
    for (char c : digits) {
      if (!std::isdigit(static_cast<unsigned char>(c))) ok = false;
      else every = every * 10 + (c - '0');
    }
    if (!ok) throw UsageError("--moe-layer-freq: '" + std::string(text) + "' is neither an integer nor a list expression");
    if (every < 1) throw UsageError("--moe-layer-freq: " + std::string(text) + " must be at least 1");
    for (std::int64_t i = 0; i < num_layers; ++i) pattern.push_back(i % every == 0);
    return pattern;
  }
  // Megatron's _eval_pattern allows these characters only (no spaces).
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)) && std::string_view(",[]()+*").find(c) == std::string_view::npos)
      throw UsageError("--moe-layer-freq: invalid pattern '" + std::string(text) + "': only digits and , [ ] ( ) + * are "
                       "allowed");
  const Value value = PatternParser(text).parse();
  const auto* list = std::get_if<std::vector<std::int64_t>>(&value);
  if (!list) throw UsageError("--moe-layer-freq: '" + std::string(text) + "' is not a list");
  if (static_cast<std::int64_t>(list->size()) != num_layers)
    throw UsageError("--moe-layer-freq: the pattern has " + std::to_string(list->size()) + " entries, --num-layers is " +
                     std::to_string(num_layers));
  for (std::int64_t v : *list) {
    if (v != 0 && v != 1)
      throw UsageError("--moe-layer-freq: the pattern's entries must be 0 (dense) or 1 (MoE), got " + std::to_string(v));
    pattern.push_back(v == 1);
  }
  return pattern;
}

}  // namespace mgt
