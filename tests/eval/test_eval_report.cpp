#include <catch2/catch.hpp>

#include <string>

#include "eval/eval_report.hpp"

using namespace mgt;

namespace {

EvalReportContext context() {
  EvalReportContext c;
  c.valid_data = "data/lambada.jsonl";
  c.checkpoint_directory = "ckpt/iter_0000010";
  c.checkpoint_iteration = 10;
  c.seq_length = 64;
  c.micro_batch_size = 4;
  c.tokenizer_type = "GPT2BPETokenizer";
  c.vocab_size = 50257;
  c.padded_vocab_size = 50304;
  return c;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Megatron's LAMBADA result line", "[eval]") {
  LambadaResult r;
  r.examples = 4;
  r.correct = 1;
  CHECK(megatron_lambada_line(r) ==
        " validation results on LAMBADA | number correct: 1.0000E+00 | total examples: 4.0000E+00 | "
        "avg accuracy: 2.5000E-01");
}

TEST_CASE("Megatron's WIKITEXT103 result line, token ratio as Python prints a float", "[eval]") {
  WikitextResult r;
  r.detokenized_tokens = 11;
  r.original_tokens = 9;
  r.loss_sum = 31.25;  // avg 3.125, ratio 1.25
  CHECK(megatron_wikitext_line(r) ==
        " validation results on WIKITEXT103 | avg loss: 3.1250E+00 | ppl: 2.2760E+01 | adjusted ppl: "
        "4.9712E+01 | token ratio: 1.25 |");
  r.original_tokens = 3;  // ratio 5.0
  CHECK(has(megatron_wikitext_line(r), "| token ratio: 5.0 |"));
}

TEST_CASE("between_dashes frames a line as Megatron does", "[eval]") {
  CHECK(between_dashes("ab") == "---\nab\n---\n");
}

TEST_CASE("the LAMBADA report holds metrics, counts, checkpoint and settings", "[eval]") {
  LambadaResult r;
  r.examples = 4;
  r.correct = 2;
  r.truncated = 1;
  r.target_tokens = 5;
  r.target_loss_sum = 5.0;
  const std::string json = lambada_report_json(r, true, context());
  for (const char* part : {"\"task\": \"LAMBADA\"", "\"valid_data\": \"data/lambada.jsonl\"", "\"accuracy\": 0.5",
                           "\"target_avg_loss\": 1.0", "\"target_ppl\": 2.718281828459045", "\"examples\": 4",
                           "\"correct\": 2", "\"truncated\": 1", "\"target_tokens\": 5",
                           "\"directory\": \"ckpt/iter_0000010\"", "\"iteration\": 10", "\"seq_length\": 64",
                           "\"micro_batch_size\": 4", "\"strict_lambada\": true", "\"type\": \"GPT2BPETokenizer\"",
                           "\"padded_vocab_size\": 50304"})
    CHECK(has(json, part));
  CHECK(json.front() == '{');
  CHECK(json.back() == '\n');
}

TEST_CASE("the WIKITEXT103 report holds metrics, counts, checkpoint and settings", "[eval]") {
  WikitextResult r;
  r.detokenized_tokens = 11;
  r.original_tokens = 9;
  r.windows = 3;
  r.scored_targets = 10;
  r.loss_sum = 20.0;
  const std::string json = wikitext_report_json(r, 32, DetokenizerKind::kWikitext, context());
  for (const char* part : {"\"task\": \"WIKITEXT103\"", "\"avg_loss\": 2.0", "\"ppl\": 7.38905609893065",
                           "\"token_ratio\": 1.25", "\"original_tokens\": 9", "\"detokenized_tokens\": 11",
                           "\"windows\": 3", "\"scored_targets\": 10", "\"overlapping_eval\": 32",
                           "\"detokenizer\": \"wiki\"", "\"iteration\": 10"})
    CHECK(has(json, part));
}
