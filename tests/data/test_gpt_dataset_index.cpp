#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/md5.hpp"
#include "data/dataset_split.hpp"
#include "data/gpt_dataset_index.hpp"
#include "data/gpt_index_arrays.hpp"
#include "data/index_job.hpp"
#include "data/indexed_dataset.hpp"
#include "test_paths.hpp"

using namespace mgt;

// Golden arrays come from megatron-core 0.13's own functions, e.g.
//   from megatron.core.datasets.gpt_dataset import _build_document_index, _build_shuffle_index
//   from megatron.core.datasets import helpers
//   sizes = numpy.array([5,3,7,2,9,4], numpy.int32); docs = numpy.arange(1, 6, dtype=numpy.int32)
//   rs = numpy.random.RandomState(1234); d = _build_document_index(docs, E, rs, separate)
//   s = helpers.build_sample_idx(sizes, d, 4, E, 25, True, True)
//   sh = _build_shuffle_index(n_sans_final_or_n, n, rs)

namespace {

template <typename T>
std::vector<std::int64_t> as_int64(const NpyArray& a) {
  auto v = a.values<T>();
  return {v.begin(), v.end()};
}

std::vector<std::int64_t> flat(const NpyArray& a) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a.get(i));
  return out;
}

// One sequence per document, with tokens 100*k + position so a sample shows where it came from.
std::shared_ptr<const IndexedDataset> write_dataset(const std::string& prefix,
                                                    const std::vector<std::int32_t>& lengths) {
  IndexedDatasetWriter w(prefix, DType::Int32);
  for (std::size_t k = 0; k < lengths.size(); ++k) {
    std::vector<TokenId> tokens;
    for (std::int32_t p = 0; p < lengths[k]; ++p) tokens.push_back(static_cast<TokenId>(100 * k + p));
    std::vector<std::int32_t> l = {lengths[k]};
    w.add_document(tokens, l);
  }
  w.finalize();
  return std::make_shared<const IndexedDataset>(prefix);
}

GptDatasetConfig gpt2_config(std::int64_t seq, const std::string& split) {
  GptDatasetConfig c;
  c.sequence_length = seq;
  c.split = split;
  c.split_matrix = split_matrix(parse_split(split));
  c.tokenizer = {"_GPT2BPETokenizer", {"gpt2-vocab.json", "gpt2-merges.txt"}, {}};
  return c;
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

TEST_CASE("split flag parses and normalises like Megatron", "[index]") {
  auto w = parse_split("969, 30, 1");
  CHECK(w[0] == 0.969);
  CHECK(w[1] == 0.03);
  CHECK(w[2] == 0.001);
  auto m = split_matrix(w);
  REQUIRE(m[2]);
  CHECK(m[0]->first == 0.0);
  CHECK(m[1]->second == 0.999);
  CHECK(m[2]->second == 1.0);

  auto padded = split_matrix(parse_split("98,2"));
  CHECK(padded[1]->second == 1.0);
  CHECK_FALSE(padded[2]);
  // Zero width in front: null, then a float lower bound (only the very first bound is the int 0).
  CHECK(split_matrix_value(split_matrix(parse_split("0,7,3"))).dumps() ==
        "[\n    null,\n    [\n        0.0,\n        0.7\n    ],\n    [\n        0.7,\n        1.0\n    ]\n]");
  CHECK(split_matrix_value(split_matrix(parse_split("1"))).dumps() ==
        "[\n    [\n        0,\n        1.0\n    ],\n    null,\n    null\n]");

  for (const char* bad : {"1,2,3,4", "0,0,0", "-1,2,3", "train", "1.2.3,1", ".,1", ""}) {
    INFO(bad);
    try {
      parse_split(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.exit_code() == kExitUsage);
      CHECK(std::string(e.what()).find("--split") != std::string::npos);
    }
  }
}

TEST_CASE("split ranges round half to even like Python", "[index]") {
  auto m = split_matrix(parse_split("969, 30, 1"));
  CHECK(split_range(*m[0], 7222) == std::make_pair<std::int64_t, std::int64_t>(0, 6998));
  CHECK(split_range(*m[1], 7222) == std::make_pair<std::int64_t, std::int64_t>(6998, 7215));
  CHECK(split_range(*m[2], 7222) == std::make_pair<std::int64_t, std::int64_t>(7215, 7222));
  CHECK(split_range(*m[1], 10) == std::make_pair<std::int64_t, std::int64_t>(10, 10));
  CHECK(split_range({0.0, 0.5}, 5).second == 2);  // round(2.5) == 2
  CHECK(split_range({0.0, 0.5}, 7).second == 4);  // round(3.5) == 4
  auto thirds = split_matrix(parse_split("1,1,1"));
  CHECK(split_range(*thirds[1], 100) == std::make_pair<std::int64_t, std::int64_t>(33, 67));
}

TEST_CASE("epochs and the separate final epoch, worked by hand", "[index]") {
  // 15 tokens per epoch, samples of 4 (+1 extra token): 3 samples per epoch.
  CHECK(plan_epochs(15, std::nullopt, 4, 1).num_epochs == 1);
  CHECK(plan_epochs(15, 3, 4, 1).num_epochs == 1);  // 13 tokens needed
  auto five = plan_epochs(15, 5, 4, 1);             // 21 needed: 2 epochs, 2 from the last >= int(2.4)
  CHECK(five.num_epochs == 2);
  CHECK_FALSE(five.separate_final_epoch);
  auto four = plan_epochs(15, 4, 4, 1);  // 1 sample from the last epoch < 2: shuffled apart
  CHECK(four.num_epochs == 2);
  CHECK(four.separate_final_epoch);
  CHECK(four.samples_sans_final_epoch == 3);
  CHECK(plan_epochs(15, 4, 4, 0).num_epochs == 2);  // 16 tokens without the extra one
  CHECK_THROWS_AS(plan_epochs(0, 4, 4, 1), Error);
}

TEST_CASE("index arrays that cannot fit in memory are refused before the build", "[index]") {
  auto plan = plan_epochs(1000, std::int64_t{1} << 36, 8, 1);  // 2^36 samples over 2^29 epochs
  try {
    check_index_memory("the train split of corpus", 10, 1000, plan, 8);
    FAIL("expected a UsageError");
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(e.exit_code() == kExitUsage);
    CHECK(msg.find("the train split of corpus: ") == 0);
    CHECK(msg.find("TiB of indices, more than") != std::string::npos);
    CHECK(msg.find("--global-batch-size") != std::string::npos);
  }
  CHECK_NOTHROW(check_index_memory("the train split of corpus", 10, 1000, plan_epochs(1000, 500, 8, 1), 8));
}

TEST_CASE("sample index rows, worked by hand", "[index]") {
  std::vector<std::int32_t> sizes = {5, 3, 7}, docs = {0, 1, 2};
  // Sample 0 = seq 0 [0,5); sample 1 = seq 0 [4,5) + seq 1 + seq 2 [0,1) (a sample crossing
  // documents); sample 2 = seq 2 [0,5): consecutive samples share one token.
  auto drop = build_sample_index(sizes, docs, 4, 1, 15, true, 1);
  CHECK(drop.dtype() == NpyDType::Int32);
  CHECK(drop.shape() == std::vector<std::size_t>{4, 2});
  CHECK(flat(drop) == std::vector<std::int64_t>{0, 0, 0, 4, 2, 0, 2, 4});
  // Keeping the partial last sample: ceil(14 / 4) = 4 samples, the last one ends the data.
  CHECK(flat(build_sample_index(sizes, docs, 4, 1, 15, false, 1)) ==
        std::vector<std::int64_t>{0, 0, 0, 4, 2, 0, 2, 4, 2, 6});
  // Without the extra token samples do not overlap.
  CHECK(flat(build_sample_index(sizes, docs, 4, 1, 15, true, 0)) ==
        std::vector<std::int64_t>{0, 0, 0, 4, 1, 3, 2, 4});
}

TEST_CASE("document, sample and shuffle indices match megatron-core", "[index]") {
  std::vector<std::int32_t> sizes = {5, 3, 7, 2, 9, 4};
  std::vector<std::int32_t> docs = {1, 2, 3, 4, 5};  // 25 tokens

  SECTION("one epoch") {
    auto plan = plan_epochs(25, 3, 4, 1);
    NumpyRandomState r(1234);
    auto d = build_document_index(docs, plan.num_epochs, plan.separate_final_epoch, r);
    CHECK(d == std::vector<std::int32_t>{5, 1, 2, 3, 4});
    auto s = build_sample_index(sizes, d, 4, plan.num_epochs, 25, true, 1);
    CHECK(flat(s) == std::vector<std::int64_t>{0, 0, 1, 0, 2, 1, 2, 5, 4, 0, 4, 4, 4, 8});
    auto sh = build_shuffle_index(6, 6, r);
    CHECK(sh.dtype() == NpyDType::UInt32);
    CHECK(as_int64<std::uint32_t>(sh) == std::vector<std::int64_t>{5, 2, 3, 1, 0, 4});
  }
  SECTION("two epochs shuffled together") {
    auto plan = plan_epochs(25, 10, 4, 1);
    CHECK(plan.num_epochs == 2);
    CHECK_FALSE(plan.separate_final_epoch);
    NumpyRandomState r(1234);
    auto d = build_document_index(docs, 2, false, r);
    CHECK(d == std::vector<std::int32_t>{3, 3, 5, 2, 1, 4, 5, 1, 2, 4});
    auto s = build_sample_index(sizes, d, 4, 2, 25, true, 1);
    CHECK(flat(s) == std::vector<std::int64_t>{0, 0, 2, 0, 3, 0, 3, 4, 4, 1, 5, 2, 5, 6,
                                               6, 1, 7, 1, 8, 2, 8, 6, 9, 3, 9, 7});
    CHECK(as_int64<std::uint32_t>(build_shuffle_index(12, 12, r)) ==
          std::vector<std::int64_t>{3, 11, 2, 1, 7, 5, 4, 0, 8, 6, 10, 9});
  }
  SECTION("a separate final epoch") {
    auto plan = plan_epochs(25, 14, 4, 1);
    CHECK(plan.num_epochs == 3);
    CHECK(plan.separate_final_epoch);
    CHECK(plan.samples_sans_final_epoch == 12);
    NumpyRandomState r(1234);
    auto d = build_document_index(docs, 3, true, r);
    CHECK(d == std::vector<std::int32_t>{3, 3, 5, 2, 1, 4, 5, 1, 2, 4, 1, 5, 4, 3, 2});
    auto s = build_sample_index(sizes, d, 4, 3, 25, true, 1);
    CHECK(s.shape()[0] == 19);
    CHECK(as_int64<std::uint32_t>(build_shuffle_index(12, 18, r)) ==
          std::vector<std::int64_t>{7, 11, 2, 3, 1, 9, 5, 4, 0, 8, 6, 10, 17, 13, 16, 15, 12, 14});
  }
}

TEST_CASE("GPTDataset description and hash are Megatron's", "[index]") {
  // json.dumps(unique_identifiers, indent=4) of a real GPTDatasetConfig, md5 hexdigest.
  auto config = gpt2_config(1024, "969, 30, 1");
  auto v = gpt_dataset_identifiers("data/x_text_document", 32000, Split::Train, config);
  std::string text = v.dumps();
  CHECK(text.rfind("{\n    \"class\": \"GPTDataset\",\n    \"dataset_path\": \"data/x_text_document\",\n    "
                   "\"num_samples\": 32000,\n    \"index_split\": \"train\",\n",
                   0) == 0);
  CHECK(md5_hex(text) == "06058eb411f1cc354af09ccf02d5aa72");

  GptDatasetConfig per_split;
  per_split.random_seed = 7;
  per_split.sequence_length = 16;
  per_split.tokenizer = {"_NullTokenizer", {std::nullopt}, {{"vocab_size", "100"}}};
  auto n = gpt_dataset_identifiers("a", std::nullopt, Split::Train, per_split).dumps();
  CHECK(n.find("\"split\": null,\n    \"split_matrix\": null") != std::string::npos);
  CHECK(n.find("\"tokenizer_path\": [\n            null\n        ],\n        \"vocab_size\": \"100\"") !=
        std::string::npos);
  CHECK(md5_hex(n) == "12132c6577d1f6f9ace3fb3d086220de");
}

TEST_CASE("GPT indices are built, cached, reloaded and validated", "[index]") {
  auto dir = test::scratch_dir("gpt_index_cache");
  auto data = write_dataset(dir + "/six", {5, 3, 7, 2, 9, 4});
  auto config = gpt2_config(4, "1");
  config.path_to_cache = dir + "/cache";

  auto built = build_gpt_dataset_index(data, dir + "/six", {1, 6}, 14, Split::Train, config);
  CHECK_FALSE(built.loaded_from_cache);
  CHECK(built.tokens_per_epoch == 25);
  CHECK(built.num_epochs == 3);
  CHECK(built.separate_final_epoch);
  CHECK(built.size() == 18);
  CHECK(as_int64<std::int32_t>(built.document_index) ==
        std::vector<std::int64_t>{3, 3, 5, 2, 1, 4, 5, 1, 2, 4, 1, 5, 4, 3, 2});
  REQUIRE(built.cache_files.size() == 4);
  CHECK(built.cache_files[0] == dir + "/cache/" + built.hash + "-GPTDataset-train-description.txt");
  CHECK(built.cache_files[3] == dir + "/cache/" + built.hash + "-GPTDataset-train-shuffle_index.npy");
  for (const auto& f : built.cache_files) CHECK(std::filesystem::is_regular_file(f));

  auto loaded = build_gpt_dataset_index(data, dir + "/six", {1, 6}, 14, Split::Train, config);
  CHECK(loaded.loaded_from_cache);
  CHECK(flat(loaded.document_index) == flat(built.document_index));
  CHECK(flat(loaded.sample_index) == flat(built.sample_index));
  CHECK(flat(loaded.shuffle_index) == flat(built.shuffle_index));

  // Determinism: another directory gets the same bytes.
  auto other = config;
  other.path_to_cache = dir + "/cache2";
  auto again = build_gpt_dataset_index(data, dir + "/six", {1, 6}, 14, Split::Train, other);
  for (std::size_t k = 0; k < 4; ++k) {
    std::ifstream a(built.cache_files[k], std::ios::binary), b(again.cache_files[k], std::ios::binary);
    CHECK(std::string(std::istreambuf_iterator<char>(a), {}) == std::string(std::istreambuf_iterator<char>(b), {}));
  }

  // A damaged cache file is an error naming it, never a crash.
  {
    std::ofstream out(built.cache_files[2], std::ios::binary | std::ios::trunc);
    out << "garbage";
  }
  auto msg = error_of([&] { build_gpt_dataset_index(data, dir + "/six", {1, 6}, 14, Split::Train, config); });
  CHECK(msg.find(built.cache_files[2]) != std::string::npos);

  // A missing file means a rebuild, which repairs the set.
  std::filesystem::remove(built.cache_files[2]);
  auto rebuilt = build_gpt_dataset_index(data, dir + "/six", {1, 6}, 14, Split::Train, config);
  CHECK_FALSE(rebuilt.loaded_from_cache);
  CHECK(flat(rebuilt.sample_index) == flat(built.sample_index));
}

TEST_CASE("default cache directory and refused inputs", "[index]") {
  auto dir = test::scratch_dir("gpt_index_default");
  auto data = write_dataset(dir + "/d", {4, 0, 6, 5});
  auto config = gpt2_config(3, "1");
  auto index = build_gpt_dataset_index(data, dir + "/d", {0, 4}, 2, Split::Valid, config);
  CHECK(index.cache_directory == dir + "/d/cache/GPTDataset_indices");
  CHECK(std::filesystem::is_regular_file(index.cache_files[1]));
  CHECK(index.cache_files[1].find("-GPTDataset-valid-document_index.npy") != std::string::npos);

  auto msg = error_of([&] { build_gpt_dataset_index(data, dir + "/d", {1, 2}, 2, Split::Test, config); });
  CHECK(msg.find("holds no tokens") != std::string::npos);
  CHECK(msg.find(dir + "/d") != std::string::npos);
  CHECK(error_of([&] { build_gpt_dataset_index(data, dir + "/d", {2, 2}, 2, Split::Test, config); })
            .find("test split") != std::string::npos);
  auto bad = config;
  bad.sequence_length = 0;
  CHECK_THROWS_AS(build_gpt_dataset_index(data, dir + "/d", {0, 4}, 2, Split::Train, bad), Error);
}

namespace {

class FakeTokenizer final : public Tokenizer {
public:
  using Tokenizer::tokenize;
  void tokenize(std::string_view, std::vector<TokenId>&) override {}
  std::string detokenize(std::span<const TokenId>) const override { return ""; }
  std::unique_ptr<Tokenizer> clone() const override { return std::make_unique<FakeTokenizer>(); }
  std::int64_t vocab_size() const override { return 50257; }
  TokenId eod() const override { return 50256; }
  std::string class_name() const override { return "_GPT2BPETokenizer"; }
  std::vector<std::string> tokenizer_paths() const override { return {"v.json", "m.txt"}; }
};

}  // namespace

TEST_CASE("requested sample counts follow training.py", "[index]") {
  IndexOptions o;
  o.train_iters = 100;
  o.global_batch_size = 32;
  o.eval_iters = 10;
  o.eval_interval = 50;
  CHECK(requested_samples(o) == std::array<std::int64_t, 3>{3200, 960, 320});
  o.train_iters.reset();
  o.train_samples = 1000;  // train_iters = 1000 // 32 = 31
  CHECK(requested_samples(o) == std::array<std::int64_t, 3>{1000, 320, 320});
  o.train_iters = 5;
  CHECK(error_of([&] { requested_samples(o); }).find("mutually exclusive") != std::string::npos);
  IndexOptions none;
  none.global_batch_size = 4;
  CHECK_THROWS_AS(requested_samples(none), Error);
}

TEST_CASE("build_indices cuts one prefix into splits", "[index]") {
  auto dir = test::scratch_dir("index_job_single");
  std::vector<std::int32_t> lengths;
  for (int k = 0; k < 40; ++k) lengths.push_back(3 + k % 7);
  write_dataset(dir + "/corpus", lengths);
  IndexOptions o;
  o.data_path = {dir + "/corpus"};
  o.split = "8,1,1";
  o.seq_length = 8;
  o.train_iters = 10;
  o.global_batch_size = 2;
  o.eval_iters = 2;
  o.eval_interval = 5;
  o.data_cache_path = dir + "/cache";
  FakeTokenizer tok;
  auto result = build_indices(o, tok);
  REQUIRE(result.splits[0]);
  REQUIRE(result.splits[2]);
  CHECK(result.splits[0]->datasets[0].sequence_range == std::make_pair<std::int64_t, std::int64_t>(0, 32));
  CHECK(result.splits[1]->datasets[0].sequence_range == std::make_pair<std::int64_t, std::int64_t>(32, 36));
  CHECK(result.splits[0]->requested == 20);
  CHECK(result.splits[1]->requested == 12);
  for (const auto& s : result.splits) CHECK(s->size() >= static_cast<std::size_t>(s->requested));
  auto json = index_summary_json(result);
  CHECK(json.find("\"cache_hit\": false") != std::string::npos);
  auto again = build_indices(o, tok);
  CHECK(again.splits[0]->datasets[0].loaded_from_cache);

  IndexOptions bad = o;
  bad.seq_length = 0;
  CHECK(error_of([&] { build_indices(bad, tok); }).find("--seq-length") != std::string::npos);
  bad = o;
  bad.data_path = {dir + "/missing"};
  CHECK(error_of([&] { build_indices(bad, tok); }).find(dir + "/missing.idx") != std::string::npos);
  bad = o;
  bad.split = "1,2,3,4";
  CHECK(error_of([&] { build_indices(bad, tok); }).find("--split") != std::string::npos);
  bad = o;
  bad.train_data_path = {dir + "/corpus"};
  CHECK(error_of([&] { build_indices(bad, tok); }).find("cannot be combined") != std::string::npos);
}
