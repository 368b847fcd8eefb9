// JSON integers wider than 64 bits: found with where they are, rewritten as reals so that
// simdjson reads them, and read by JsonScalars (a Hugging Face config with transformers'
// int(1e30) "no maximum") as doubles.
#include <catch2/catch.hpp>
#include <string>

#include "core/json_scalars.hpp"
#include "core/json_wide_integers.hpp"

using namespace mgt;

TEST_CASE("Integers beyond 64 bits are found with their path", "[core][json]") {
  const std::string text =
      R"({"a": 1, "model_max_length": 1000000000000000019884624838656, "s": "123456789012345678901234",)"
      R"( "nested": {"list": [0, 5, -9223372036854775809, 18446744073709551616]}, "real": 123456789012345678901.5,)"
      R"( "esc": "\"99999999999999999999999\"", "fits": [18446744073709551615, -9223372036854775808, 00000000000000000000001]})";
  const std::vector<WideJsonInteger> wide = find_wide_json_integers(text);
  REQUIRE(wide.size() == 3);
  CHECK(wide[0].literal == "1000000000000000019884624838656");
  CHECK(wide[0].path == "model_max_length");
  CHECK(text.substr(wide[0].offset, wide[0].literal.size()) == wide[0].literal);
  CHECK(wide[1].literal == "-9223372036854775809");
  CHECK(wide[1].path == "nested.list[2]");
  CHECK(wide[2].literal == "18446744073709551616");
  CHECK(wide[2].path == "nested.list[3]");

  CHECK(find_wide_json_integers("123456789012345678901234567890").front().path.empty());
  CHECK(find_wide_json_integers(R"({"n": 12})").empty());
  CHECK(json_with_wide_integers_as_reals(R"({"n": 12})") == R"({"n": 12})");
  CHECK(json_with_wide_integers_as_reals(R"([100000000000000000000000, "1000000000000000000000000", -1e400])") ==
        R"([100000000000000000000000.0, "1000000000000000000000000", -1e400])");
}

TEST_CASE("JsonScalars reads an integer beyond 64 bits as a double", "[core][json]") {
  const JsonScalars config(
      R"({"model_max_length": 1000000000000000019884624838656, "vocab_size": 50257, "eos_token": "</s>"})",
      "tokenizer_config.json");
  CHECK(config.real("model_max_length") == 1e30);
  CHECK_THROWS_WITH(config.integer("model_max_length"), Catch::Contains("'model_max_length' is not an integer"));
  CHECK(config.integer("vocab_size") == 50257);
  CHECK(config.text("eos_token") == "</s>");
  CHECK_THROWS_WITH(JsonScalars(R"({"a": 1)", "x.json"), Catch::StartsWith("x.json is not valid JSON"));
}
