#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "eval/lambada_task.hpp"
#include "eval_testing.hpp"
#include "test_paths.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace mgt;
using eval_testing::ByteTokenizer;
using eval_testing::bytes;
using eval_testing::RuleScorer;
using Ids = std::vector<std::int64_t>;
using Tokens = std::vector<TokenId>;

namespace {

std::string write_file(const std::string& dir, const std::string& name, const std::string& contents) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("LAMBADA without --strict-lambada: the last token of the whole text is the target", "[eval]") {
  ByteTokenizer tokenizer;
  const LambadaExample e = lambada_example("ab c", tokenizer, false);
  CHECK(e.context == bytes("ab "));
  CHECK(e.target == bytes("c"));
  CHECK_THROWS_AS(lambada_example("", tokenizer, false), Error);
  CHECK_THAT(error_of([&] { lambada_example("a", tokenizer, false); }), Catch::Contains("single word"));
}

TEST_CASE("LAMBADA with --strict-lambada: the last word, tokenized with a leading space", "[eval]") {
  ByteTokenizer tokenizer;
  LambadaExample e = lambada_example("the cat  sat", tokenizer, true);
  CHECK(e.context == bytes("the cat"));  // text before the word, stripped
  CHECK(e.target == bytes(" sat"));
  e = lambada_example("sat on sat", tokenizer, true);  // rfind: the last occurrence
  CHECK(e.context == bytes("sat on"));
  e = lambada_example("hi there \n", tokenizer, true);
  CHECK(e.context == bytes("hi"));
  CHECK(e.target == bytes(" there"));
  e = lambada_example("\u00a0one\u00a0two", tokenizer, true);  // Python whitespace splits words
  CHECK(e.context == bytes("one"));
  CHECK(e.target == bytes(" two"));
  // One word: nothing precedes the target, nothing would be scored (Megatron counts it right).
  CHECK_THAT(error_of([&] { lambada_example("alone", tokenizer, true); }), Catch::Contains("single word"));
  CHECK_THROWS_AS(lambada_example(" \n ", tokenizer, true), Error);
}

TEST_CASE("LAMBADA with the GPT-2 tokenizer: the strict target is the word's own tokens", "[eval]") {
  const auto tokenizer = make_tokenizer({"GPT2BPETokenizer", test::dataset_path("gpt2-vocab.json"),
                                         test::dataset_path("gpt2-merges.txt"), std::nullopt, 0});
  const std::string text = "In my palm is a small ivory statuette";
  const LambadaExample strict = lambada_example(text, *tokenizer, true);
  CHECK(strict.context == tokenizer->tokenize("In my palm is a small ivory"));
  CHECK(strict.target == tokenizer->tokenize(" statuette"));
  CHECK(strict.target.size() > 1);
  const LambadaExample loose = lambada_example(text, *tokenizer, false);
  Tokens whole = tokenizer->tokenize(text);
  CHECK(loose.target == Tokens{whole.back()});
  whole.pop_back();
  CHECK(loose.context == whole);
}

TEST_CASE("lambada_row scores the target positions and keeps the last seq_length + 1 tokens", "[eval]") {
  LambadaExample e{1, {1, 2, 3}, {4, 5}};
  LambadaRow r = lambada_row(e, 10);
  CHECK_FALSE(r.truncated);
  CHECK(r.row.tokens == Ids{1, 2, 3, 4});
  CHECK(r.row.labels == Ids{2, 3, 4, 5});
  CHECK(r.row.first_scored == 2);

  r = lambada_row(e, 4);  // exactly seq_length + 1 tokens: fits
  CHECK_FALSE(r.truncated);
  r = lambada_row(e, 3);  // one too many: the first context token goes
  CHECK(r.truncated);
  CHECK(r.row.tokens == Ids{2, 3, 4});
  CHECK(r.row.labels == Ids{3, 4, 5});
  CHECK(r.row.first_scored == 1);
  r = lambada_row(e, 2);  // only the last context token is left
  CHECK(r.row.tokens == Ids{3, 4});
  CHECK(r.row.first_scored == 0);
  CHECK_THROWS_AS(lambada_row(e, 1), Error);  // the target alone needs 2 positions

  // No context: the first target token is nobody's label (Megatron's mask drops it too).
  r = lambada_row({1, {}, {7, 8}}, 10);
  CHECK(r.row.tokens == Ids{7});
  CHECK(r.row.labels == Ids{8});
  CHECK(r.row.first_scored == 0);
  r = lambada_row({1, {}, {7}}, 10);
  CHECK(r.row.tokens.empty());
}

TEST_CASE("evaluate_lambada counts hits, losses and truncations by hand", "[eval]") {
  ByteTokenizer tokenizer;
  // The rule model predicts the next byte value, and also 'b' -> ' ' and ' ' -> 'c'.
  RuleScorer scorer;
  scorer.successor = {{'b', ' '}, {' ', 'c'}};
  std::vector<LambadaExample> examples = {
      lambada_example("xab", tokenizer, false),    // target 'b' after 'a': hit, 0.25
      lambada_example("xabd", tokenizer, false),   // target 'd' after 'b' (predicts ' '): miss, 1.5
      lambada_example("ab cd", tokenizer, true),   // " cd": b->' ', ' '->c, c->d: hit, 3 x 0.25
      lambada_example("ab ce", tokenizer, true),   // " ce": last e vs d: miss, 0.25 + 0.25 + 1.5
      lambada_example("xyzxyzab", tokenizer, false),  // 8 tokens, seq 6: truncated; b after a: hit
  };
  for (std::size_t i = 0; i < examples.size(); ++i) examples[i].line = static_cast<std::int64_t>(i + 1);
  for (std::int64_t mbs : {1, 2, 3, 8}) {
    scorer.calls.clear();
    const LambadaResult r = evaluate_lambada(examples, scorer, {6, mbs, 256, "lambada.jsonl"});
    CHECK(r.examples == 5);
    CHECK(r.correct == 3);
    CHECK(r.truncated == 1);
    CHECK(r.target_tokens == 9);
    CHECK(r.target_loss_sum == Approx(0.25 + 1.5 + 0.75 + 2.0 + 0.25));
    CHECK(r.accuracy() == Approx(0.6));
    CHECK(r.target_perplexity() == Approx(std::exp(4.75 / 9)));
    CHECK(std::ssize(scorer.calls) == (5 + mbs - 1) / mbs);
  }
}

TEST_CASE("evaluate_lambada names the line of an example whose target cannot fit", "[eval]") {
  RuleScorer scorer;
  const std::vector<LambadaExample> examples = {{1, {1}, {2}}, {2, {1}, {2, 3, 4}}};
  CHECK(error_of([&] { evaluate_lambada(examples, scorer, {2, 1, 0, "data.jsonl"}); }) ==
        "data.jsonl:2: the target is 3 tokens, more than --seq-length 2 leaves room for");
  CHECK(scorer.calls.empty());  // checked before any forward pass
}

TEST_CASE("read_lambada_examples reads JSON lines and names the line at fault", "[eval]") {
  const std::string dir = test::scratch_dir("eval-lambada-read");
  ByteTokenizer tokenizer;
  const std::string good = write_file(dir, "good.jsonl", "{\"text\": \"ab c\"}\r\n{\"text\": \"d\\u00e9 f\", \"x\": 1}\n");
  const std::vector<LambadaExample> examples = read_lambada_examples(good, tokenizer, true);
  REQUIRE(examples.size() == 2);
  CHECK(examples[1].line == 2);
  CHECK(examples[1].context == bytes("d\u00e9"));

  const std::string bad = write_file(dir, "bad.jsonl", "{\"text\": \"a b\"}\n{\"text\": \"a b\"\n");
  CHECK(error_of([&] { read_lambada_examples(bad, tokenizer, false); }).rfind(bad + ":2: ", 0) == 0);
  const std::string no_text = write_file(dir, "no_text.jsonl", "{\"txt\": \"a b\"}\n");
  CHECK(error_of([&] { read_lambada_examples(no_text, tokenizer, false); }).rfind(no_text + ":1: ", 0) == 0);
  const std::string list = write_file(dir, "list.jsonl", "{\"text\": [\"a\", \"b\"]}\n");
  CHECK(error_of([&] { read_lambada_examples(list, tokenizer, false); }).find(":1: \"text\" is a list") !=
        std::string::npos);
  const std::string blank = write_file(dir, "blank.jsonl", "{\"text\": \"a b\"}\n\n{\"text\": \"a b\"}\n");
  CHECK(error_of([&] { read_lambada_examples(blank, tokenizer, false); }).rfind(blank + ":2: ", 0) == 0);
  const std::string no_word = write_file(dir, "no_word.jsonl", "{\"text\": \" \"}\n");
  CHECK(error_of([&] { read_lambada_examples(no_word, tokenizer, true); }) == no_word + ":1: the text has no words");
  // A one-word line has no scorable target: an input error naming its file and line, in both modes.
  const std::string one_word = write_file(dir, "one_word.jsonl", "{\"text\": \"a b\"}\n{\"text\": \"word\"}\n");
  CHECK(error_of([&] { read_lambada_examples(one_word, tokenizer, true); }).rfind(one_word + ":2: the text is a single word", 0) == 0);
  const std::string one_token = write_file(dir, "one_token.jsonl", "{\"text\": \"a b\"}\n{\"text\": \"w\"}\n");
  CHECK(error_of([&] { read_lambada_examples(one_token, tokenizer, false); }).rfind(one_token + ":2: the text is a single word", 0) == 0);
  const std::string empty = write_file(dir, "empty.jsonl", "");
  CHECK(error_of([&] { read_lambada_examples(empty, tokenizer, false); }) == empty + ": no examples (the file is empty)");
  CHECK_FALSE(error_of([&] { read_lambada_examples(dir + "/missing.jsonl", tokenizer, false); }).empty());
}
