// The JSON lines mgt-generate reads and writes.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "../test_paths.hpp"
#include "generate/completion_json.hpp"
#include "generate/prompt_reader.hpp"

using namespace mgt;

TEST_CASE("Completions are written as one JSON object per line", "[generate]") {
  Completion c;
  c.prompt_tokens = {1, 2, 3};
  c.tokens = {40, 41};
  c.log_probs = {-0.5f, -1.25f};
  c.text = "caf\xc3\xa9 \"x\"\n";
  c.finish_reason = FinishReason::kStop;
  CHECK(completion_json(3, "p\tq", c, true) ==
        "{\"index\": 3, \"prompt\": \"p\\tq\", \"text\": \"caf\\u00e9 \\\"x\\\"\\n\", \"tokens\": [40, 41], "
        "\"log_probs\": [-0.5, -1.25], \"finish_reason\": \"stop\", \"prompt_tokens\": 3, \"generated_tokens\": 2}");
  c.tokens.clear();
  c.finish_reason = FinishReason::kEndOfDocument;
  CHECK(completion_json(0, "", c, false) ==
        "{\"index\": 0, \"prompt\": \"\", \"text\": \"caf\\u00e9 \\\"x\\\"\\n\", \"tokens\": [], "
        "\"finish_reason\": \"eod\", \"prompt_tokens\": 3, \"generated_tokens\": 0}");
}

TEST_CASE("Prompts are read in batches, blank lines skipped, bad lines named", "[generate]") {
  const std::string dir = mgt::test::scratch_dir("prompt_reader");
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream(path) << "{\"prompt\": \"a\", \"id\": 7}\n\n{\"prompt\": \"b\\u00e9\"}\n  \n{\"prompt\": \"c\"}\n"
                      << "{\"prompt\": [\"x\", \"y\"]}\n{\"text\": \"d\"}\n";
  PromptReader reader(path);
  CHECK(reader.next_batch(2) == std::vector<std::string>{"a", "b\xc3\xa9"});
  CHECK_THROWS_WITH(reader.next_batch(2), Catch::Contains("prompts.jsonl:6: \"prompt\" is a list"));

  std::ofstream(path) << "{\"prompt\": \"a\"}\n{\"text\": \"d\"}\n";
  PromptReader missing(path);
  CHECK_THROWS_WITH(missing.next_batch(5), Catch::Contains("prompts.jsonl:2:") && Catch::Contains("prompt"));
  std::ofstream(path) << "{\"prompt\": \"a\"}\n";
  PromptReader one(path);
  CHECK(one.next_batch(5).size() == 1);
  CHECK(one.next_batch(5).empty());
  CHECK(one.prompts_read() == 1);
}
