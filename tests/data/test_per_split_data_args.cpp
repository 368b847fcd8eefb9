// --per-split-data-args-path (data/per_split_data_args.hpp): Megatron's JSON file of the three
// per-split lists, read as get_blend_and_blend_per_split reads it, and its refusals; mgt-index and
// mgt-train take it like the per-split flags it stands for.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/index_command_line.hpp"
#include "data/per_split_data_args.hpp"
#include "test_paths.hpp"

using namespace mgt;

namespace {

using Words = std::vector<std::string>;

// `text` as the file `name` in the directory `dir` (each test case's own: the cases may run at
// once, and a scratch directory is emptied when it is made).
std::string file_with(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

DatasetSourceOptions read(const std::string& dir, const std::string& text) {
  DatasetSourceOptions o;
  o.per_split_data_args_path = file_with(dir, "args.json", text);
  read_per_split_data_args(o);
  return o;
}

std::string refusal(const std::string& dir, const std::string& text, DatasetSourceOptions o = {}) {
  o.per_split_data_args_path = file_with(dir, "bad.json", text);
  try {
    read_per_split_data_args(o);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  FAIL("not refused: " << text);
  return {};
}

}  // namespace

TEST_CASE("per-split data args: lists, strings of words and null", "[data]") {
  const DatasetSourceOptions o =
      read(test::scratch_dir("per_split_data_args_lists"),
           "{\"train\": [\"0.3\", \"/d/a\", \"0.7\", \"/d/b\"],\n \"valid\": \"  /d/v1\\t/d/v2\\n\", \"test\": null}");
  CHECK(o.train_data_path == Words{"0.3", "/d/a", "0.7", "/d/b"});
  CHECK(o.valid_data_path == Words{"/d/v1", "/d/v2"});
  CHECK(o.test_data_path.empty());
  CHECK_FALSE(o.per_split_data_args_path);  // read: a second call has nothing to do
  DatasetSourceOptions again = o;
  read_per_split_data_args(again);
  CHECK(again.train_data_path == o.train_data_path);
}

TEST_CASE("per-split data args: refusals name the file and the key", "[data]") {
  const std::string dir = test::scratch_dir("per_split_data_args_refusals");
  const std::string at = "--per-split-data-args-path " + dir + "/bad.json: ";
  CHECK(refusal(dir, "{\"train\": [\"a\"], \"valid\": [\"b\"]}") == at + "no \"test\" key");
  CHECK(refusal(dir, "{\"train\": [], \"valid\": null, \"test\": null}") ==
        at + "\"train\" is empty (give null for a split without data)");
  CHECK(refusal(dir, "{\"train\": \"  \", \"valid\": null, \"test\": null}") ==
        at + "\"train\" is empty (give null for a split without data)");
  CHECK(refusal(dir, "{\"train\": [\"a\", 1], \"valid\": null, \"test\": null}") ==
        at + "\"train\" must hold strings only");
  CHECK(refusal(dir, "{\"train\": 3, \"valid\": null, \"test\": null}") ==
        at + "\"train\" must be a list of strings, a string or null");
  CHECK(refusal(dir, "{\"train\": null, \"valid\": null, \"test\": null}") == at + "every split is null");
  CHECK(refusal(dir, "[\"a\"]") ==
        at + "expected a JSON object with the keys \"train\", \"valid\" and \"test\"");
  CHECK(refusal(dir, "{\"train\": [\"a\"").rfind(at + "malformed JSON (", 0) == 0);
  DatasetSourceOptions with_flag;
  with_flag.valid_data_path = {"v"};
  CHECK(refusal(dir, "{}", with_flag) ==
        "--per-split-data-args-path and --train-data-path/--valid-data-path/--test-data-path are mutually exclusive");
  DatasetSourceOptions with_data_path;
  with_data_path.data_path = {"d"};
  CHECK(refusal(dir, "{}", with_data_path) ==
        "--per-split-data-args-path and --data-path (or --data-args-path) are mutually exclusive");
  DatasetSourceOptions missing;
  missing.per_split_data_args_path = "/nonexistent/args.json";
  CHECK_THROWS_AS(read_per_split_data_args(missing), Error);
}

TEST_CASE("per-split data args: mgt-index takes the file as the per-split flags", "[data][command_line]") {
  const std::string path = file_with(test::scratch_dir("per_split_data_args_index"), "index.json",
                                     "{\"train\": \"w a\", \"valid\": [\"b\"], \"test\": null}");
  const char* argv[] = {"mgt-index", "--per-split-data-args-path", path.c_str()};
  const IndexOptions o = parse_index_command_line(3, argv).options;
  CHECK(o.train_data_path == Words{"w", "a"});
  CHECK(o.valid_data_path == Words{"b"});
  CHECK(o.test_data_path.empty());
}
