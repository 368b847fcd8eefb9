// Every JSON text mgt writes is strict JSON: a value that is not a finite number becomes null,
// with a reason beside it, never a bare NaN or Infinity that strict parsers refuse.
#include <catch2/catch.hpp>

#include <simdjson.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/json_text.hpp"
#include "data/python_json.hpp"
#include "eval/eval_report.hpp"
#include "generate/completion_json.hpp"

using namespace mgt;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Parses with simdjson, which follows RFC 8259: no NaN, no Infinity.
simdjson::dom::element parse_strict(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element root;
  const auto error = parser.parse(text).get(root);
  INFO(text);
  REQUIRE_FALSE(error);
  return root;
}

EvalReportContext context() {
  EvalReportContext c;
  c.valid_data = "wiki.test.tokens";
  c.checkpoint_directory = "ckpt/iter_0000010";
  c.seq_length = 64;
  c.micro_batch_size = 4;
  return c;
}

}  // namespace

TEST_CASE("json_float writes null for what JSON cannot hold", "[core]") {
  CHECK(json_float(0.25) == "0.25");
  CHECK(json_float(1e-05) == "1e-05");
  CHECK(json_float(kNaN) == "null");
  CHECK(json_float(kInf) == "null");
  CHECK(json_float(-kInf) == "null");
  PyValue v = PyValue::dict();
  v.set("a", PyValue::real(kNaN));
  v.set("b", PyValue::real(2.0));
  CHECK(v.dumps() == "{\n    \"a\": null,\n    \"b\": 2.0\n}");
}

TEST_CASE("eval results: a non-finite metric is null, with its reason", "[eval]") {
  WikitextResult w;
  w.original_tokens = 9;
  w.detokenized_tokens = 11;
  w.windows = 1;
  w.scored_targets = 10;
  w.loss_sum = kNaN;  // a model whose weights hold NaN
  simdjson::dom::parser parser;
  const std::string text = wikitext_report_json(w, 32, DetokenizerKind::kWikitext, context());
  const simdjson::dom::element r = parse_strict(parser, text);
  CHECK(r["avg_loss"].is_null());
  CHECK(r["ppl"].is_null());
  CHECK(r["token_ratio"].get_double().value() == Approx(10.0 / 8.0));
  CHECK(std::string(r["null_reasons"]["ppl"].get_string().value()).find("NaN") != std::string::npos);
  CHECK(r["null_reasons"]["token_ratio"].error() == simdjson::NO_SUCH_FIELD);

  LambadaResult l;
  l.examples = 2;
  l.correct = 1;
  l.target_tokens = 2;
  l.target_loss_sum = 2000.0;  // exp(1000) is infinite
  const simdjson::dom::element lr = parse_strict(parser, lambada_report_json(l, false, context()));
  CHECK(lr["accuracy"].get_double().value() == 0.5);
  CHECK(lr["target_avg_loss"].get_double().value() == 1000.0);
  CHECK(lr["target_ppl"].is_null());
  CHECK(std::string(lr["null_reasons"]["target_ppl"].get_string().value()).find("infinite") != std::string::npos);

  // A finite report has no reasons to give.
  l.target_loss_sum = 2.0;
  CHECK(lambada_report_json(l, false, context()).find("null_reasons") == std::string::npos);
}

TEST_CASE("completions: a non-finite log-probability is null, with its reason", "[generate]") {
  Completion c;
  c.prompt_tokens = {1};
  c.tokens = {5, 6};
  c.log_probs = {-0.5f, -std::numeric_limits<float>::infinity()};
  simdjson::dom::parser parser;
  const simdjson::dom::element r = parse_strict(parser, completion_json(0, "p", c, true));
  CHECK(r["log_probs"].at(0).get_double().value() == -0.5);
  CHECK(r["log_probs"].at(1).is_null());
  CHECK(r["log_probs_null_reason"].is_string());
  c.log_probs = {-0.5f, -1.0f};
  CHECK(completion_json(0, "p", c, true).find("null_reason") == std::string::npos);
}
