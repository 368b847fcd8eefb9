#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/json_document.hpp"

using namespace mgt;

namespace {

std::vector<std::string> texts(const JsonDocumentParser& p, std::size_t k = 0) {
  std::vector<std::string> out;
  for (auto s : p.texts(k)) out.emplace_back(s);
  return out;
}

std::string error_of(std::string_view line, std::vector<std::string> keys = {"text"}) {
  JsonDocumentParser p(std::move(keys));
  try {
    p.parse(line);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("json document: a string is one text, a list is pre-split sentences", "[tokenize]") {
  JsonDocumentParser p({"text"});
  p.parse(R"({"text": "Hello world."})");
  CHECK(texts(p) == std::vector<std::string>{"Hello world."});
  CHECK_FALSE(p.is_list(0));
  p.parse(R"({"text": ["One.", " Two.", ""]})");
  CHECK(texts(p) == std::vector<std::string>{"One.", " Two.", ""});
  CHECK(p.is_list(0));
  p.parse(R"({"text": []})");
  CHECK(texts(p).empty());
  p.parse(R"({"text": ""})");  // an empty document, as in Megatron
  CHECK(texts(p) == std::vector<std::string>{""});
}

TEST_CASE("json document: decoding follows json.loads", "[tokenize]") {
  JsonDocumentParser p({"text", "title"});
  p.parse(R"(  {"title": "T", "text": "\u00e9\ud83d\ude00 \"q\" \\ \t\n\u0000"}  )");
  CHECK(texts(p, 0) == std::vector<std::string>{std::string("\xC3\xA9\xF0\x9F\x98\x80 \"q\" \\ \t\n\0", 16)});
  CHECK(texts(p, 1) == std::vector<std::string>{"T"});
  p.parse(R"({"te\u0078t": "escaped key", "title": "x"})");
  CHECK(texts(p) == std::vector<std::string>{"escaped key"});
  p.parse(R"({"text": "first", "title": "x", "text": "last wins"})");
  CHECK(texts(p) == std::vector<std::string>{"last wins"});
  // Values of other keys are not parsed: json.loads accepts NaN and big integers.
  p.parse(R"({"id": 123456789012345678901234567890, "s": NaN, "text": "t", "title": "x", "n": {"text": 1}})");
  CHECK(texts(p) == std::vector<std::string>{"t"});
  // An unpaired surrogate escape outside the requested keys is accepted by json.loads too.
  p.parse(R"({"m": "\ud800", "\udc00": ["\ud800"], "text": "t", "title": "x"})");
  CHECK(texts(p) == std::vector<std::string>{"t"});
}

TEST_CASE("json document: malformed values of other keys are refused like json.loads does", "[tokenize]") {
  for (const char* bad : {R"({"text":"a","x":tru})", R"({"text":"a","x":01})", R"({"text":"a","x":1.})",
                          R"({"text":"a","x":-})", R"({"text":"a","x":{"b"}})", R"({"text":"a","x":[1,,2]})",
                          R"({"text":"a","x":"\q"})", R"({"text":"a","x":"\u12"})", R"({"text":"a","x":}})",
                          R"({"text":"a","x":[1,2})", R"({"x":1,"text":"a",})"}) {
    INFO(bad);
    CHECK_THAT(error_of(bad), Catch::Contains("malformed JSON"));
  }
  for (const char* good : {R"({"text":"a","x":-0.5e+3})", R"({"text":"a","x":-Infinity})",
                           R"({"text":"a","x":[true,false,null,{}]})", R"({"text":"a","x":"\/\b\f"})"}) {
    INFO(good);
    CHECK(error_of(good).empty());
  }
}

TEST_CASE("json document: every bad line says what is wrong", "[tokenize]") {
  CHECK_THAT(error_of(""), Catch::Contains("empty line"));
  CHECK_THAT(error_of("   "), Catch::Contains("empty line"));
  CHECK_THAT(error_of(R"({"text": "unterminated)"), Catch::Contains("malformed JSON"));
  CHECK_THAT(error_of(R"({"text": "a",})"), Catch::Contains("malformed JSON"));
  CHECK_THAT(error_of(R"({"text": "a"} {"text": "b"})"), Catch::Contains("malformed JSON"));
  CHECK_THAT(error_of(R"({"text": "a"}])"), Catch::Contains("malformed JSON"));
  // What json.loads calls extra data, and a byte-order mark on a line of its own, are named.
  CHECK(error_of(R"({"text": "a"} x)") == "malformed JSON (unexpected content after the object)");
  CHECK(error_of(R"({"text": "a\"}"} x)") == "malformed JSON (unexpected content after the object)");
  CHECK_THAT(error_of("\xEF\xBB\xBF{\"text\": \"a\"}"), Catch::Contains("a UTF-8 byte-order mark starts the line"));
  // A scalar is named only when the whole line is one ("nope" is not null).
  CHECK(error_of("null") == "the line is null, expected a JSON object");
  CHECK(error_of(" 42 ") == "the line is a number, expected a JSON object");
  CHECK_THAT(error_of("nope"), Catch::Contains("malformed JSON"));
  CHECK_THAT(error_of("tru"), Catch::Contains("malformed JSON"));
  CHECK_THAT(error_of(R"(["text"])"), Catch::Contains("expected a JSON object"));
  CHECK_THAT(error_of(R"("text")"), Catch::Contains("expected a JSON object"));
  CHECK_THAT(error_of(R"({"title": "x"})"), Catch::Contains("missing key 'text'"));
  CHECK_THAT(error_of(R"({"text": 5})"), Catch::Contains("key 'text' is a number"));
  {
    // A reader of one string per line (prompts, LAMBADA) offers no list in the message.
    JsonDocumentParser strings({"prompt"}, /*lists=*/false);
    CHECK_THROWS_WITH(strings.parse(R"({"prompt": 5})"), "key 'prompt' is a number, expected a string");
  }
  CHECK_THAT(error_of(R"({"text": null})"), Catch::Contains("key 'text' is null"));
  CHECK_THAT(error_of(R"({"text": {"a": "b"}})"), Catch::Contains("key 'text' is an object"));
  CHECK_THAT(error_of(R"({"text": true})"), Catch::Contains("key 'text' is a boolean"));
  CHECK_THAT(error_of(R"({"text": ["a", 1]})"), Catch::Contains("list element 1 is a number"));
  CHECK_THAT(error_of(R"({"text": ["a", ["b"]]})"), Catch::Contains("list element 1 is a list"));
  CHECK_THAT(error_of("{\"text\": \"caf\xE9\"}"), Catch::Contains("invalid UTF-8"));
  CHECK_THAT(error_of("{\"x\": \"\xFF\", \"text\": \"a\"}"), Catch::Contains("invalid UTF-8"));
  CHECK_THAT(error_of(R"({"text": "lone \ud800 high"})"), Catch::Contains("key 'text': invalid string"));
  CHECK_THAT(error_of(R"({"text": "lone \udc00 low"})"), Catch::Contains("key 'text': invalid string"));
  CHECK_THAT(error_of(R"({"text": ["a", "\ud800"]})"), Catch::Contains("key 'text': invalid string"));
  CHECK_THAT(error_of(R"({"text": "bad escape \q"})"), Catch::Contains("key 'text': invalid string"));
  CHECK_THAT(error_of("{\"text\": \"raw\ttab\"}"), Catch::Contains("malformed JSON"));
  CHECK_THAT(error_of(R"({"text": "a"})", {"text", "title"}), Catch::Contains("missing key 'title'"));
}

TEST_CASE("json document: a parser is reusable after an error", "[tokenize]") {
  JsonDocumentParser p({"text"});
  CHECK_THROWS_AS(p.parse("{"), Error);
  p.parse(R"({"text": "fine"})");
  CHECK(texts(p) == std::vector<std::string>{"fine"});
}
