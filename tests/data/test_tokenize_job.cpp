#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/indexed_dataset.hpp"
#include "data/tokenize_job.hpp"
#include "test_paths.hpp"
#include "tokenize_testing.hpp"

using namespace mgt;
using test::files_in;
using test::null_options;
namespace fs = std::filesystem;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TokenizeOptions gpt2_options(const std::string& input, const std::string& prefix) {
  TokenizeOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "GPT2BPETokenizer";
  o.tokenizer.vocab_file = test::dataset_path("gpt2-vocab.json");
  o.tokenizer.merge_file = test::dataset_path("gpt2-merges.txt");
  o.quiet = true;
  o.workers = 2;
  return o;
}

struct Doc {
  std::vector<std::vector<std::int64_t>> sequences;
  bool operator==(const Doc&) const = default;
};

std::vector<Doc> read_docs(const std::string& prefix) {
  IndexedDataset ds(prefix);
  std::vector<Doc> docs;
  for (std::size_t d = 0; d < ds.document_count(); ++d) {
    Doc doc;
    for (auto s = ds.document_index(d); s < ds.document_index(d + 1); ++s)
      doc.sequences.push_back(ds.read(static_cast<std::size_t>(s)));
    docs.push_back(doc);
  }
  return docs;
}

Error error_of(const TokenizeOptions& o) {
  try {
    run_tokenize(o);
  } catch (const Error& e) {
    return e;
  }
  return Error("no error");
}


}  // namespace

TEST_CASE("tokenize: sentences, empty documents and EOD follow Megatron's Encoder", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_encoder");
  write_text(dir + "/in.jsonl",
             "{\"text\": \"1 2 3\"}\n"
             "{\"text\": [\"4 5\", \"6\"]}\n"
             "{\"text\": []}\n"
             "{\"text\": \"7\"}");
  auto o = null_options(dir + "/in.jsonl", dir + "/plain");
  auto summary = run_tokenize(o);
  CHECK(summary.documents == 4);
  CHECK(summary.lines == 4);
  REQUIRE(summary.outputs.size() == 1);
  CHECK(summary.outputs[0].prefix == dir + "/plain_text_document");
  CHECK(summary.outputs[0].sequences == 4);
  CHECK(summary.outputs[0].tokens == 7);
  CHECK(summary.dtype == "uint16");
  CHECK(read_docs(dir + "/plain_text_document") ==
        std::vector<Doc>{{{{1, 2, 3}}}, {{{4, 5}, {6}}}, {}, {{{7}}}});

  o.output_prefix = dir + "/eod";
  o.append_eod = true;
  run_tokenize(o);
  CHECK(read_docs(dir + "/eod_text_document") ==
        std::vector<Doc>{{{{1, 2, 3, 100}}}, {{{4, 5}, {6, 100}}}, {}, {{{7, 100}}}});
}

TEST_CASE("tokenize: one dataset per key", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_keys");
  write_text(dir + "/in.jsonl", "{\"a\": \"1\", \"b\": \"2 3\"}\n{\"b\": [], \"a\": \"4\"}\n");
  auto o = null_options(dir + "/in.jsonl", dir + "/out");
  o.json_keys = {"a", "b"};
  auto summary = run_tokenize(o);
  REQUIRE(summary.outputs.size() == 2);
  CHECK(read_docs(dir + "/out_a_document") == std::vector<Doc>{{{{1}}}, {{{4}}}});
  CHECK(read_docs(dir + "/out_b_document") == std::vector<Doc>{{{{2, 3}}}, {}});
}

TEST_CASE("tokenize: GPT-2 text, empty text and a literal <|endoftext|>", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_gpt2");
  write_text(dir + "/in.jsonl",
             "{\"text\": \"Hello world\"}\r\n{\"text\": \"\"}\n{\"text\": \"<|endoftext|>\"}\n");
  auto o = gpt2_options(dir + "/in.jsonl", dir + "/out");
  o.append_eod = true;
  run_tokenize(o);
  CHECK(read_docs(dir + "/out_text_document") ==
        std::vector<Doc>{{{{15496, 995, 50256}}}, {}, {{{27, 91, 437, 1659, 5239, 91, 29, 50256}}}});
}

TEST_CASE("tokenize: bad lines stop the run at FILE:LINE and leave no output", "[tokenize]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"1\"", "malformed JSON"},
      {"{\"title\": \"1\"}", "missing key 'text'"},
      {"{\"text\": 1}", "is a number"},
      {"{\"text\": [\"1\", null]}", "list element 1 is null"},
      {"{\"text\": \"\xC3\x28\"}", "invalid UTF-8"},
      {"{\"text\": \"\\udfff\"}", "invalid string"},
      {"", "empty line"},
      {"{\"text\": \"1 x\"}", "x"},  // the tokenizer refuses it (int('x') in Megatron)
  };
  for (const auto& [line, what] : cases) {
    auto dir = test::scratch_dir("tokenize_bad_line");
    write_text(dir + "/in.jsonl", "{\"text\": \"1 2\"}\n{\"text\": \"3\"}\n" + line + "\n{\"text\": \"4\"}\n");
    auto o = null_options(dir + "/in.jsonl", dir + "/out");
    o.json_keys = {"text"};
    Error e = error_of(o);
    INFO(line);
    CHECK_THAT(std::string(e.what()), Catch::StartsWith(dir + "/in.jsonl:3: ") && Catch::Contains(what));
    CHECK(e.exit_code() == 1);
    CHECK(files_in(dir) == std::set<std::string>{"in.jsonl"});
  }
}

TEST_CASE("tokenize: --skip-bad-lines skips and counts", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_skip");
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += i % 7 == 3 ? "{\"text\": 5}\n" : "{\"text\": \"" + std::to_string(i % 100) + "\"}\n";  // ids of the vocabulary
  write_text(dir + "/in.jsonl", text);
  auto o = null_options(dir + "/in.jsonl", dir + "/out");
  o.skip_bad_lines = true;
  o.max_warnings = 3;
  o.batch_bytes = 64;
  auto summary = run_tokenize(o);
  CHECK(summary.bad_lines == 43);
  CHECK(summary.documents == 257);
  CHECK(summary.lines == 300);
  auto docs = read_docs(dir + "/out_text_document");
  REQUIRE(docs.size() == 257);
  CHECK(docs[3] == Doc{{{4}}});
}

TEST_CASE("tokenize: output is the same for any number of workers and batch size", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_workers");
  std::string corpus = file_bytes(test::dataset_path("corpus-tinyshakespeare.jsonl")).substr(0, 200000);
  corpus.resize(corpus.rfind('\n') + 1);
  write_text(dir + "/in.jsonl", corpus);
  write_text(dir + "/in.jsonl.gz", test::gzip_bytes(corpus));
  auto base = gpt2_options(dir + "/in.jsonl", dir + "/w1");
  base.append_eod = true;
  base.workers = 1;
  run_tokenize(base);
  struct Variant {
    std::string name;
    std::size_t workers;
    std::size_t batch;
    std::string input;
  };
  for (const auto& v : {Variant{"w4", 4, 1000, "in.jsonl"}, Variant{"w3", 3, 1, "in.jsonl"},
                        Variant{"gz", 4, 1 << 20, "in.jsonl.gz"}}) {
    auto o = base;
    o.workers = v.workers;
    o.batch_bytes = v.batch;
    o.inputs = {dir + "/" + v.input};
    o.output_prefix = dir + "/" + v.name;
    run_tokenize(o);
    INFO(v.name);
    CHECK(file_bytes(dir + "/" + v.name + "_text_document.bin") == file_bytes(dir + "/w1_text_document.bin"));
    CHECK(file_bytes(dir + "/" + v.name + "_text_document.idx") == file_bytes(dir + "/w1_text_document.idx"));
  }
}

TEST_CASE("tokenize: several inputs are one stream, errors name the right file", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_inputs");
  write_text(dir + "/b.jsonl", "{\"text\": \"2\"}\n{\"text\": \"3\"}\n");
  write_text(dir + "/a.jsonl", "{\"text\": \"1\"}\n");
  write_text(dir + "/c.json", "{\"text\": \"4\"}\n");
  auto o = null_options(dir + "/*.jsonl", dir + "/out");
  o.inputs.push_back(dir + "/c.json");
  run_tokenize(o);
  CHECK(read_docs(dir + "/out_text_document") == std::vector<Doc>{{{{1}}}, {{{2}}}, {{{3}}}, {{{4}}}});
  write_text(dir + "/b.jsonl", "{\"text\": \"2\"}\n{\"text\": true}\n");
  CHECK_THAT(std::string(error_of(o).what()), Catch::StartsWith(dir + "/b.jsonl:2: "));
  o.inputs = {dir + "/a.jsonl", dir + "/missing.jsonl"};
  CHECK_THAT(std::string(error_of(o).what()), Catch::Contains("missing.jsonl"));
}

TEST_CASE("tokenize: --partitions orders documents like Megatron's round robin", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_partitions");
  std::string text;
  for (int i = 0; i < 7; ++i) text += "{\"text\": \"" + std::to_string(i) + "\"}\n";
  write_text(dir + "/in.jsonl", text);
  auto o = null_options(dir + "/in.jsonl", dir + "/rr");
  o.partitions = 3;
  run_tokenize(o);
  std::vector<Doc> expected;
  for (int i : {0, 3, 6, 1, 4, 2, 5}) expected.push_back(Doc{{{i}}});
  CHECK(read_docs(dir + "/rr_text_document") == expected);
  o.output_prefix = dir + "/seq";
  o.keep_sequential_samples = true;
  run_tokenize(o);
  CHECK(read_docs(dir + "/seq_text_document").front() == Doc{{{0}}});
  CHECK(read_docs(dir + "/seq_text_document").back() == Doc{{{6}}});
  CHECK(files_in(dir) == std::set<std::string>{"in.jsonl", "rr_text_document.bin", "rr_text_document.idx",
                                               "seq_text_document.bin", "seq_text_document.idx"});
}

TEST_CASE("tokenize: --split-sentences writes _sentence datasets", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_split");
  write_text(dir + "/in.jsonl", "{\"text\": \"Hello there. How are you today?\"}\n{\"text\": [\"Pre split. Kept.\"]}\n");
  auto o = gpt2_options(dir + "/in.jsonl", dir + "/out");
  o.split_sentences = true;
  auto summary = run_tokenize(o);
  REQUIRE(summary.outputs.size() == 1);
  CHECK(summary.outputs[0].prefix == dir + "/out_text_sentence");
  auto docs = read_docs(dir + "/out_text_sentence");
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].sequences.size() == 2);
  CHECK(docs[1].sequences.size() == 1);  // a list is taken as already split
}

TEST_CASE("tokenize: usage errors", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_usage");
  write_text(dir + "/in.jsonl", "{\"text\": \"1\"}\n");
  auto o = null_options(dir + "/in.jsonl", dir + "/out");
  o.lang = "german";
  CHECK(error_of(o).exit_code() == 2);
  o = null_options(dir + "/in.jsonl", dir + "/out");
  o.json_keys = {"text", "text"};
  CHECK(error_of(o).exit_code() == 2);
  o = null_options(dir + "/in.jsonl", dir + "/no/such/dir/out");
  CHECK_THAT(std::string(error_of(o).what()), Catch::Contains("does not exist"));
  o = null_options(dir + "/in.jsonl", dir + "/out");
  o.tokenizer.vocab_size.reset();
  CHECK(error_of(o).exit_code() == 2);
  CHECK(files_in(dir) == std::set<std::string>{"in.jsonl"});
}

TEST_CASE("merge: datasets concatenate like merge_datasets.py", "[tokenize]") {
  auto dir = test::scratch_dir("tokenize_merge");
  fs::create_directories(dir + "/parts");
  write_text(dir + "/a.jsonl", "{\"text\": \"1 2\"}\n{\"text\": []}\n");
  write_text(dir + "/b.jsonl", "{\"text\": [\"3\", \"4 5\"]}\n");
  auto o = null_options(dir + "/b.jsonl", dir + "/parts/b");
  run_tokenize(o);
  o = null_options(dir + "/a.jsonl", dir + "/parts/a");
  run_tokenize(o);

  TokenizeOptions m;
  m.merge = true;
  m.quiet = true;
  m.inputs = {dir + "/parts/b_text_document", dir + "/parts/a_text_document.idx"};
  m.output_prefix = dir + "/explicit";
  auto summary = run_merge(m);
  CHECK(summary.documents == 3);
  CHECK(read_docs(dir + "/explicit") == std::vector<Doc>{{{{3}, {4, 5}}}, {{{1, 2}}}, {}});

  m.inputs = {dir + "/parts"};  // a directory: its datasets sorted by name
  m.output_prefix = dir + "/fromdir";
  run_merge(m);
  CHECK(read_docs(dir + "/fromdir") == std::vector<Doc>{{{{1, 2}}}, {}, {{{3}, {4, 5}}}});

  o = null_options(dir + "/a.jsonl", dir + "/wide");
  o.tokenizer.vocab_size = 70000;  // int32 tokens
  run_tokenize(o);
  m.inputs = {dir + "/parts/a_text_document", dir + "/wide_text_document"};
  m.output_prefix = dir + "/mixed";
  CHECK_THROWS_WITH(run_merge(m), Catch::Contains("dtype"));
  CHECK_FALSE(fs::exists(dir + "/mixed.bin"));
  m.inputs = {dir + "/nothing"};
  CHECK_THROWS_WITH(run_merge(m), Catch::Contains("no dataset"));
}
