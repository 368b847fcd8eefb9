#include "eval/lambada_task.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "data/json_document.hpp"
#include "eval/python_text.hpp"

namespace mgt {

namespace {

// The lines of a file as Python's readlines() in text mode sees them: "\n", "\r\n" and "\r" end
// a line; a final line without an ending still counts.
template <class OnLine>
void for_each_line(std::string_view data, OnLine&& on_line) {
  std::int64_t number = 0;
  std::size_t start = 0;
  while (start < data.size()) {
    const std::size_t end = data.find_first_of("\r\n", start);
    if (end == std::string_view::npos) {
      on_line(++number, data.substr(start));
      return;
    }
    on_line(++number, data.substr(start, end - start));
    start = end + (data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n' ? 2 : 1);
  }
}

// A text of one word (one token without --strict-lambada) leaves its target with nothing before
// it: no position predicts it, and Megatron's product over an empty set of positions counts the
// example as right. The real LAMBADA set has no such line; one here is a broken input.
constexpr const char* kNothingToScore =
    "the text is a single word: no context precedes its target, so nothing would be scored (Megatron "
    "counts such a line as correct)";

}  // namespace

LambadaExample lambada_example(std::string_view text, Tokenizer& tokenizer, bool strict) {
  LambadaExample example;
  // Whitespace alone tokenizes to space tokens, one of which Megatron would score as the target.
  if (python_text::split(text).empty()) throw Error("the text has no words");
  if (!strict) {
    std::vector<TokenId> tokens = tokenizer.tokenize(text);
    if (tokens.empty()) throw Error("the text has no tokens");
    if (tokens.size() == 1) throw Error(kNothingToScore);
    example.target.assign(1, tokens.back());
    tokens.pop_back();
    example.context = std::move(tokens);
    return example;
  }
  const std::vector<std::string_view> words = python_text::split(text);
  const std::string_view last_word = words.back();
  const std::size_t start = text.rfind(last_word);
  example.context = tokenizer.tokenize(python_text::strip(text.substr(0, start)));
  example.target = tokenizer.tokenize(" " + std::string(last_word));
  if (example.context.empty()) throw Error(kNothingToScore);
  return example;
}

std::vector<LambadaExample> read_lambada_examples(const std::string& path, Tokenizer& tokenizer, bool strict) {
  const MappedFile file(path);
  JsonDocumentParser parser({"text"}, /*lists=*/false);
  std::vector<LambadaExample> examples;
  for_each_line(file.view(), [&](std::int64_t number, std::string_view line) {
    try {
      parser.parse(line);
      if (parser.is_list(0)) throw Error("\"text\" is a list; LAMBADA needs one string per line");
      examples.push_back(lambada_example(parser.texts(0)[0], tokenizer, strict));
      examples.back().line = number;
    } catch (const Error& e) {
      throw Error(path + ":" + std::to_string(number) + ": " + e.what());
    }
  });
  if (examples.empty()) throw Error(path + ": no examples (the file is empty)");
  return examples;
}

LambadaRow lambada_row(const LambadaExample& example, std::int64_t seq_length) {
  const auto target = static_cast<std::int64_t>(example.target.size());
  if (target > seq_length)
    throw Error("the target is " + std::to_string(target) + " tokens, more than --seq-length " +
                std::to_string(seq_length) + " leaves room for");
  std::vector<std::int64_t> sample(example.context.begin(), example.context.end());
  sample.insert(sample.end(), example.target.begin(), example.target.end());
  const std::int64_t drop = std::max<std::int64_t>(0, static_cast<std::int64_t>(sample.size()) - (seq_length + 1));
  const std::int64_t context = static_cast<std::int64_t>(example.context.size()) - drop;

  LambadaRow out;
  out.truncated = drop > 0;
  if (sample.size() - static_cast<std::size_t>(drop) < 2) {
    out.row.first_scored = 0;  // one token: nothing predicts it (Megatron's mask drops it too)
    return out;
  }
  out.row.tokens.assign(sample.begin() + drop, sample.end() - 1);
  out.row.labels.assign(sample.begin() + drop + 1, sample.end());
  // Label j is sample token j + 1: a target token from j = context − 1 on. With no context at
  // all, the first target token is nobody's label and goes unscored, as in Megatron.
  out.row.first_scored = std::max<std::int64_t>(context - 1, 0);
  return out;
}

double LambadaResult::accuracy() const {
  return examples > 0 ? static_cast<double>(correct) / static_cast<double>(examples)
                      : std::numeric_limits<double>::quiet_NaN();
}

double LambadaResult::target_avg_loss() const {
  return target_tokens > 0 ? target_loss_sum / static_cast<double>(target_tokens)
                           : std::numeric_limits<double>::quiet_NaN();
}

double LambadaResult::target_perplexity() const { return std::exp(target_avg_loss()); }

LambadaResult evaluate_lambada(std::span<const LambadaExample> examples, TokenScorer& scorer,
                               const LambadaSettings& settings,
                               const std::function<void(std::int64_t)>& on_progress) {
  LambadaResult result;
  result.examples = static_cast<std::int64_t>(examples.size());
  // Rows are checked before the first forward pass, so that a bad example fails the run at once;
  // the longest sets the length of every micro-batch.
  std::int64_t longest = 1;
  for (const LambadaExample& example : examples) {
    try {
      const LambadaRow row = lambada_row(example, settings.seq_length);
      if (row.truncated) ++result.truncated;
      longest = std::max(longest, std::ssize(row.row.tokens));
    } catch (const Error& e) {
      throw Error(settings.source + ":" + std::to_string(example.line) + ": " + e.what());
    }
  }
  const RowScoringSettings rows{settings.micro_batch_size, settings.pad_id, true, longest};
  score_rows(
      result.examples,
      [&](std::int64_t i) { return lambada_row(examples[static_cast<std::size_t>(i)], settings.seq_length).row; },
      scorer, rows,
      [&](const ScoredRow& row) {
        // Megatron: positions outside the target count as right, and the row is the product.
        bool right = true;
        for (std::size_t k = 0; k < row.labels.size(); ++k) {
          right = right && row.predicted[k] == row.labels[k];
          result.target_loss_sum += row.losses[k];
        }
        result.target_tokens += static_cast<std::int64_t>(row.labels.size());
        if (right) ++result.correct;
      },
      on_progress);
  return result;
}

}  // namespace mgt
