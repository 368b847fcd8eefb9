#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "eval/wikitext_task.hpp"
#include "eval_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using eval_testing::ByteTokenizer;
using eval_testing::bytes;
using eval_testing::RuleScorer;

namespace {

std::string write_file(const std::string& dir, const std::string& name, const std::string& contents) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return Error("");
}

}  // namespace

TEST_CASE("count_original_tokens is len(text.strip().split(\" \"))", "[eval]") {
  CHECK(count_original_tokens(" \n = A = \n B c \n ") == 6);  // = A = \n B c
  CHECK(count_original_tokens("a  b") == 3);                  // an empty word between the spaces
  CHECK(count_original_tokens("") == 1);
  CHECK(count_original_tokens("a\nb") == 1);
}

TEST_CASE("evaluate_wikitext sums the loss of every target once, by hand", "[eval]") {
  WikitextData data;
  data.tokens = bytes("abcdexyzab");  // 9 targets: e->x and z->a miss, the other 7 hit
  data.original_tokens = 4;
  RuleScorer scorer;
  for (std::int64_t mbs : {1, 2, 5, 9}) {
    scorer.calls.clear();
    const WikitextResult r = evaluate_wikitext(data, scorer, {4, 2, mbs, 256});
    CHECK(r.windows == 5);  // ceil((9 - 2) / 2) + 1; the last lies past the text
    CHECK(r.scored_targets == 9);
    CHECK(r.detokenized_tokens == 10);
    CHECK(r.original_tokens == 4);
    CHECK(r.loss_sum == Approx(7 * 0.25 + 2 * 1.5));
    CHECK(r.avg_loss() == Approx(4.75 / 9));
    CHECK(r.ppl() == Approx(std::exp(4.75 / 9)));
    CHECK(r.token_ratio() == Approx(3.0));  // (10 - 1) / (4 - 1)
    CHECK(r.adjusted_ppl() == Approx(std::exp(4.75 / 3)));
    CHECK(std::ssize(scorer.calls) == (4 + mbs - 1) / mbs);  // 4 windows have targets
  }
  // Stride = seq_length: plain consecutive windows, every target of each.
  const WikitextResult whole = evaluate_wikitext(data, scorer, {3, 3, 2, 256});
  CHECK(whole.windows == 3);
  CHECK(whole.scored_targets == 9);
  CHECK(whole.loss_sum == Approx(4.75));
}

TEST_CASE("WikiText perplexities are capped at exp(20) as Megatron caps them", "[eval]") {
  WikitextResult r;
  r.detokenized_tokens = 11;
  r.original_tokens = 6;
  r.loss_sum = 300.0;  // avg 30
  CHECK(r.ppl() == Approx(std::exp(20.0)));
  CHECK(r.adjusted_ppl() == Approx(std::exp(20.0)));
  r.loss_sum = 10.0;  // avg 1, ratio 2
  CHECK(r.ppl() == Approx(std::exp(1.0)));
  CHECK(r.adjusted_ppl() == Approx(std::exp(2.0)));
}

TEST_CASE("read_wikitext counts words, detokenizes by path and tokenizes the whole file", "[eval]") {
  const std::string dir = test::scratch_dir("eval-read-text");
  ByteTokenizer tokenizer;
  const std::string raw = " \n = A = \n b @-@ c , d \n";
  const WikitextData data = read_wikitext(write_file(dir, "x.wiki.tokens", raw), tokenizer);
  CHECK(data.detokenizer == DetokenizerKind::kWikitext);
  CHECK(data.original_tokens == 9);  // "= A = \n b @-@ c , d" split at single spaces
  CHECK(data.tokens == bytes("\n= A =\nb-c, d\n"));
  const WikitextData ptb = read_wikitext(write_file(dir, "ptb.txt", "do n't \n"), tokenizer);
  CHECK(ptb.tokens == bytes("don't\n"));

  Error e = error_of([&] { read_wikitext(write_file(dir, "plain.txt", "a b c"), tokenizer); });
  CHECK(e.exit_code() == kExitUsage);
  CHECK(std::string(e.what()).find("'ptb', 'wiki' or 'lambada'") != std::string::npos);
  const std::string bad = write_file(dir, "bad.wiki", "a b\nc \xff d\n");
  CHECK(std::string(error_of([&] { read_wikitext(bad, tokenizer); }).what()) ==
        bad + ":2: invalid UTF-8 at byte 6");
  const std::string one = write_file(dir, "one.wiki", "a");
  CHECK(std::string(error_of([&] { read_wikitext(one, tokenizer); }).what()).find("at least two") != std::string::npos);
  const std::string word = write_file(dir, "word.wiki", "abc");
  CHECK(std::string(error_of([&] { read_wikitext(word, tokenizer); }).what()).find("token ratio") != std::string::npos);
  CHECK(error_of([&] { read_wikitext(dir + "/missing.wiki", tokenizer); }).exit_code() == kExitFailure);
}
