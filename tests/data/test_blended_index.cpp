#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/md5.hpp"
#include "data/blended_index.hpp"
#include "data/index_job.hpp"
#include "data/numpy_math.hpp"
#include "test_paths.hpp"

using namespace mgt;

// Golden values from megatron-core 0.13:
//   from megatron.core.datasets import helpers
//   helpers.build_blending_indices(di, ds, numpy.array(w), len(w), size, False)
//   helpers.build_exhaustive_blending_indices(di, ds, numpy.array([3,5,2], numpy.int64), 3)
//   blended_megatron_dataset_builder._get_size_per_split_per_dataset(normalize(w), sizes, 0.005)

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::int64_t> flat(const NpyArray& a) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a.get(i));
  return out;
}

GptDatasetConfig gpt2_config() {
  GptDatasetConfig c;
  c.sequence_length = 1024;
  c.split = "969, 30, 1";
  c.split_matrix = split_matrix(parse_split(*c.split));
  c.tokenizer = {"_GPT2BPETokenizer", {"gpt2-vocab.json", "gpt2-merges.txt"}, {}};
  return c;
}

// A member dataset as the blend sees it: identifiers and a length.
GptDatasetIndex member(const std::string& path, std::int64_t num_samples, std::size_t length,
                       const GptDatasetConfig& config) {
  GptDatasetIndex m;
  m.dataset_path = path;
  m.split = Split::Valid;
  m.num_samples = num_samples;
  m.identifiers = gpt_dataset_identifiers(path, num_samples, Split::Valid, config);
  std::vector<std::uint32_t> shuffle(length);
  std::iota(shuffle.begin(), shuffle.end(), 0U);
  m.shuffle_index = NpyArray::from_vector(std::move(shuffle), {length});
  return m;
}

}  // namespace

TEST_CASE("data-path lists: weighted pairs or plain prefixes", "[index]") {
  auto b = parse_blend({"0.3 a", "0.7", "b"}, "--data-path");
  CHECK(b.prefixes == std::vector<std::string>{"a", "b"});
  REQUIRE(b.weights);
  CHECK(*b.weights == std::vector<double>{0.3, 0.7});
  auto plain = parse_blend({"a", "b"}, "--data-path");
  CHECK(plain.prefixes == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(plain.weights);
  CHECK(parse_blend({"one"}, "--data-path").prefixes == std::vector<std::string>{"one"});
  CHECK(parse_blend({"30", "x", "70", "y"}, "--data-path").weights->at(1) == 70.0);

  for (auto bad : std::vector<std::vector<std::string>>{
           {}, {"0.5", "a", "b"}, {"0", "a"}, {"-1", "a", "2", "b"}, {"1", "a", "b", "c"},
           {"nan", "a"}, {"inf", "a"}, {"1e308", "a", "1e308", "b"}, {"1e-320", "a", "1e300", "b"}}) {
    std::string msg = error_of([&] { parse_blend(bad, "--data-path"); });
    INFO(msg);
    CHECK(msg.find("--data-path") != std::string::npos);
  }
}

TEST_CASE("weights normalise with NumPy's summation", "[index]") {
  // megatron.core.datasets.utils.normalize
  CHECK(numpy_normalize(std::vector<double>{1, 2, 3}) ==
        std::vector<double>{0.16666666666666666, 0.3333333333333333, 0.5});
  std::vector<double> eleven(11);
  std::iota(eleven.begin(), eleven.end(), 1.0);
  auto n = numpy_normalize(eleven);  // 11 values: the 8-way unrolled pairwise sum
  CHECK(n[0] == 0.015151515151515152);
  CHECK(n[7] == 0.12121212121212122);
  CHECK(n[8] == 0.13636363636363635);
  auto twice = numpy_normalize(numpy_normalize(std::vector<double>{0.3, 0.7}));
  CHECK(twice == std::vector<double>{0.3, 0.7});
}

TEST_CASE("per-dataset budgets carry the 0.005 surplus", "[index]") {
  auto w = numpy_normalize(std::vector<double>{0.3, 0.7});
  CHECK(dataset_budgets(w, 3200, 0.005) == std::vector<std::int64_t>{965, 2252});
  CHECK(dataset_budgets(w, 960, 0.005) == std::vector<std::int64_t>{290, 676});
  CHECK(dataset_budgets(w, 320, 0.0) == std::vector<std::int64_t>{96, 224});
  auto w3 = numpy_normalize(std::vector<double>{1, 2, 3});
  CHECK(dataset_budgets(w3, 7, 0.005) == std::vector<std::int64_t>{3, 4, 5});
  CHECK(dataset_budgets(w3, 1, 0.005) == std::vector<std::int64_t>{2, 2, 2});
}

TEST_CASE("blending indices match helpers.cpp", "[index]") {
  auto a = build_blending_indices(std::vector<double>{0.3, 0.7}, 20);
  CHECK(a.dataset_index == std::vector<std::int16_t>{1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0,
                                                      1, 1, 0, 1, 1});
  CHECK(a.dataset_sample_index == std::vector<std::int64_t>{0, 0, 1, 2, 1, 3, 4, 2, 5, 6, 3, 7, 8,
                                                             9, 4, 10, 11, 5, 12, 13});
  auto b = build_blending_indices(std::vector<double>{0.5, 0.25, 0.25}, 12);
  CHECK(b.dataset_index == std::vector<std::int16_t>{0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0});
  CHECK(b.dataset_sample_index == std::vector<std::int64_t>{0, 0, 0, 1, 2, 1, 1, 3, 4, 2, 2, 5});
  auto e = build_exhaustive_blending_indices(std::vector<std::int64_t>{3, 5, 2});
  CHECK(e.dataset_index == std::vector<std::int16_t>{1, 0, 2, 1, 0, 1, 2, 1, 0, 1});
  CHECK(e.dataset_sample_index == std::vector<std::int64_t>{0, 0, 0, 1, 1, 2, 1, 3, 2, 4});
}

TEST_CASE("BlendedDataset description, hash and cache files", "[index]") {
  auto dir = test::scratch_dir("blended_cache");
  auto config = gpt2_config();
  config.path_to_cache = dir;
  // Member paths with a non-ASCII character: json.dumps escapes it as \u00e9.
  auto a = member("a", 101, 200, config);
  auto b = member("b\xc3\xa9", 235, 400, config);
  auto index = build_blended_dataset_index({&a, &b}, {0.3, 0.7}, 333, config);
  // md5 of json.dumps(OrderedDict(class, datasets, split, weights, size), indent=4) in Python.
  CHECK(index.hash == "bd5ec39bf08742bcbbcbce7e7fd4ca85");
  CHECK(index.description.size() == 1727);
  CHECK(index.description.find("\"b\\u00e9\"") != std::string::npos);
  CHECK(md5_hex(index.description) == index.hash);
  CHECK(index.size() == 333);
  CHECK(index.dataset_index.dtype() == NpyDType::Int16);
  CHECK(index.dataset_sample_index.dtype() == NpyDType::Int64);
  REQUIRE(index.cache_files.size() == 3);
  CHECK(index.cache_files[1] == dir + "/" + index.hash + "-BlendedDataset-valid-dataset_index.npy");
  for (const auto& f : index.cache_files) CHECK(std::filesystem::is_regular_file(f));

  auto loaded = build_blended_dataset_index({&a, &b}, {0.3, 0.7}, 333, config);
  CHECK(loaded.loaded_from_cache);
  CHECK(flat(loaded.dataset_index) == flat(index.dataset_index));
  CHECK(flat(loaded.dataset_sample_index) == flat(index.dataset_sample_index));

  // Without --data-cache-path the blend lives in memory only, like Megatron's.
  auto uncached = gpt2_config();
  auto memory = build_blended_dataset_index({&a, &b}, {0.3, 0.7}, 333, uncached);
  CHECK(memory.cache_files.empty());
  CHECK(flat(memory.dataset_index) == flat(index.dataset_index));
}

TEST_CASE("a blend that oversamples a member is refused", "[index]") {
  auto config = gpt2_config();
  auto a = member("a", 10, 10, config);
  auto b = member("b", 10, 3, config);
  auto msg = error_of([&] { build_blended_dataset_index({&a, &b}, {0.5, 0.5}, 12, config); });
  CHECK(msg.find("asks b for 6 samples, more than its 3") != std::string::npos);
}

namespace {

class FakeTokenizer final : public Tokenizer {
public:
  using Tokenizer::tokenize;
  void tokenize(std::string_view, std::vector<TokenId>&) override {}
  std::string detokenize(std::span<const TokenId>) const override { return ""; }
  std::unique_ptr<Tokenizer> clone() const override { return std::make_unique<FakeTokenizer>(); }
  std::int64_t vocab_size() const override { return 1000; }
  TokenId eod() const override { return 999; }
  std::string class_name() const override { return "_NullTokenizer"; }
  std::vector<std::string> tokenizer_paths() const override { return {}; }
  std::vector<std::pair<std::string, std::string>> tokenizer_options() const override {
    return {{"vocab_size", "999"}};
  }
};

void write_dataset(const std::string& prefix, int documents, int first_token) {
  IndexedDatasetWriter w(prefix, DType::Int32);
  for (int k = 0; k < documents; ++k) {
    std::vector<TokenId> tokens(static_cast<std::size_t>(5 + k % 4), first_token + k);
    std::vector<std::int32_t> l = {static_cast<std::int32_t>(tokens.size())};
    w.add_document(tokens, l);
  }
  w.finalize();
}

}  // namespace

TEST_CASE("build_indices blends weighted and unweighted prefixes", "[index]") {
  auto dir = test::scratch_dir("index_job_blend");
  write_dataset(dir + "/a", 60, 100);
  write_dataset(dir + "/b", 90, 500);
  FakeTokenizer tok;
  IndexOptions o;
  o.data_path = {"1 " + dir + "/a 3 " + dir + "/b"};
  o.split = "90,10,0";
  o.seq_length = 6;
  o.train_iters = 10;
  o.global_batch_size = 4;
  o.eval_iters = 2;
  o.eval_interval = 5;
  o.data_cache_path = dir + "/cache";
  auto r = build_indices(o, tok);
  REQUIRE(r.splits[0]);
  CHECK_FALSE(r.splits[2]);  // zero width: not built
  const auto& train = *r.splits[0];
  REQUIRE(train.blend);
  CHECK(train.requested == 40);
  CHECK(train.datasets[0].num_samples == 11);  // ceil(ceil(40 * 0.25) * 1.005)
  CHECK(train.datasets[1].num_samples == 31);
  CHECK(train.size() == 40);                   // 10 + 30
  CHECK(train.blend->weights == std::vector<double>{0.25, 0.75});
  CHECK(r.splits[1]->requested == 24);  // (10 // 5 + 1) * 2 * 4

  IndexOptions plain = o;
  plain.data_path = {dir + "/a", dir + "/b"};
  auto p = build_indices(plain, tok);
  const auto& ptrain = *p.splits[0];
  CHECK_FALSE(ptrain.datasets[0].num_samples);  // one epoch each
  CHECK(ptrain.size() == 40);                   // min(requested, total samples)
  auto json = index_summary_json(p);
  CHECK(json.find("\"blend\": {") != std::string::npos);
  CHECK(index_summary_table(p).find("(blend)") != std::string::npos);

  IndexOptions per_split = o;
  per_split.data_path.clear();
  per_split.split.reset();
  per_split.train_data_path = {dir + "/a"};
  per_split.valid_data_path = {"1", dir + "/a", "1", dir + "/b"};
  auto s = build_indices(per_split, tok);
  CHECK(s.splits[0]->datasets[0].sequence_range == std::make_pair<std::int64_t, std::int64_t>(0, 60));
  CHECK(s.splits[1]->blend);
  CHECK_FALSE(s.splits[2]);
  CHECK(s.config.split_matrix == std::nullopt);
}
