#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/md5.hpp"
#include "data/mock_gpt_dataset.hpp"

using namespace mgt;

namespace {

// Golden values written by megatron-core 0.13.0 itself:
//   python3 tools/reference/mock_dataset_reference.py  (pip install megatron-core==0.13.0 torch numpy==1.26.4)
//       --out tests/data/fixtures/mock_gpt_reference.txt    (one line)
// (the file's header and the script's docstring describe the format).
std::string fixture_path() {
  return std::string(MGT_SOURCE_DIR) + "/tests/data/fixtures/mock_gpt_reference.txt";
}

struct ConfigLine {
  std::string name;
  std::int64_t seq_length = 0;
  std::uint32_t seed = 0;
  std::int64_t eod = 0, pad = -1;
  bool eod_mask_loss = false, reset_position_ids = false, reset_attention_mask = false;
  std::array<std::optional<std::int64_t>, 3> samples;
};

struct IndexLine {
  std::size_t length = 0;
  std::int64_t epochs = 0;
  std::string document_md5, sample_dtype, sample_md5, shuffle_dtype, shuffle_md5;
};

struct SampleLine {
  std::size_t index = 0;
  std::vector<std::int64_t> tokens, labels, position_ids, segment_starts;
  std::vector<float> loss_mask;
  std::string digest;  // set for digest lines instead of the values
};

struct Reference {
  std::vector<ConfigLine> configs;
  std::map<std::pair<std::string, std::string>, IndexLine> indices;  // (config, split)
  std::map<std::pair<std::string, std::string>, std::vector<SampleLine>> samples;
};

template <typename T>
std::vector<T> read_list(std::istringstream& in, const std::string& name) {
  std::string label;
  std::size_t n = 0;
  in >> label >> n;
  REQUIRE(label == name);
  std::vector<T> out(n);
  for (auto& v : out) in >> v;
  return out;
}

Reference load_reference() {
  std::ifstream file(fixture_path());
  REQUIRE(file.good());
  Reference ref;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind, name, split;
    in >> kind >> name;
    if (kind == "config") {
      ConfigLine c;
      c.name = name;
      int eml = 0, rpi = 0, ram = 0;
      std::int64_t train = 0, valid = 0, test = 0;
      in >> c.seq_length >> c.seed >> c.eod >> c.pad >> eml >> rpi >> ram >> train >> valid >> test;
      c.eod_mask_loss = eml != 0;
      c.reset_position_ids = rpi != 0;
      c.reset_attention_mask = ram != 0;
      c.samples = {train, valid, test};
      ref.configs.push_back(c);
      continue;
    }
    in >> split;
    auto key = std::make_pair(name, split);
    if (kind == "index") {
      IndexLine x;
      in >> x.length >> x.epochs >> x.document_md5 >> x.sample_dtype >> x.sample_md5 >>
          x.shuffle_dtype >> x.shuffle_md5;
      ref.indices[key] = x;
    } else if (kind == "sample") {
      SampleLine s;
      in >> s.index;
      s.tokens = read_list<std::int64_t>(in, "tokens");
      s.labels = read_list<std::int64_t>(in, "labels");
      s.loss_mask = read_list<float>(in, "loss_mask");
      s.position_ids = read_list<std::int64_t>(in, "position_ids");
      s.segment_starts = read_list<std::int64_t>(in, "segment_starts");
      ref.samples[key].push_back(s);
    } else if (kind == "digest") {
      SampleLine s;
      in >> s.index >> s.digest;
      ref.samples[key].push_back(s);
    } else {
      FAIL("unknown fixture line: " << line);
    }
    REQUIRE(!in.fail());
  }
  return ref;
}

std::string md5_of(const NpyArray& a) {
  auto b = a.bytes();
  return md5_hex(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

const char* dtype_name(NpyDType t) {
  switch (t) {
    case NpyDType::Int32: return "int32";
    case NpyDType::Int64: return "int64";
    case NpyDType::UInt32: return "uint32";
    default: return "other";
  }
}

template <typename T>
void append_bytes(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// MD5 of what Megatron's item holds: tokens, labels (int64), loss mask (float32), positions.
std::string sample_digest(const GptSample& s) {
  std::string bytes;
  append_bytes(bytes, s.tokens);
  append_bytes(bytes, s.labels);
  append_bytes(bytes, s.loss_mask);
  append_bytes(bytes, s.position_ids);
  return md5_hex(bytes);
}

GptSampleOptions sample_options(const ConfigLine& c) {
  GptSampleOptions o;
  o.sequence_length = c.seq_length;
  o.eod = static_cast<TokenId>(c.eod);
  o.pad = c.pad;
  o.eod_mask_loss = c.eod_mask_loss;
  o.reset_position_ids = c.reset_position_ids;
  o.reset_attention_mask = c.reset_attention_mask;
  return o;
}

}  // namespace

TEST_CASE("Mock sequences count up from 1 and end with eod", "[mock]") {
  MockGptLowLevelDataset data(50256);
  REQUIRE(data.sequence_count() == 100000);
  CHECK(data.sequence_length(0) == 3484);
  CHECK(data.sequence_length(5) == 168);
  CHECK(data.sequence_length(99999) == 769);
  std::vector<std::int64_t> whole(168);
  data.read(5, 0, 168, whole.data());
  for (std::size_t p = 0; p + 1 < whole.size(); ++p) REQUIRE(whole[p] == static_cast<std::int64_t>(p + 1));
  CHECK(whole.back() == 50256);
  std::vector<std::int64_t> tail(3);
  data.read(5, 165, 3, tail.data());
  CHECK(tail == std::vector<std::int64_t>{166, 167, 50256});
  // Tokens are not bounded by any vocabulary: sequence 0 reaches 3483.
  std::vector<std::int64_t> end(2);
  data.read(0, 3482, 2, end.data());
  CHECK(end == std::vector<std::int64_t>{3483, 50256});
  CHECK_THROWS_AS(data.read(5, 166, 3, tail.data()), Error);
  CHECK_THROWS_AS(data.sequence_length(100000), Error);
}

TEST_CASE("Later Megatron versions wrap mock tokens modulo the vocabulary size", "[mock]") {
  // (numpy.arange(length - 1) + 1) % tokenizer.vocab_size, then eod.
  MockGptLowLevelDataset data(1000, 1001);
  std::vector<std::int64_t> around(4);
  data.read(0, 999, 4, around.data());
  CHECK(around == std::vector<std::int64_t>{1000, 0, 1, 2});
  std::vector<std::int64_t> end(2);
  data.read(0, 3482, 2, end.data());
  CHECK(end == std::vector<std::int64_t>{3483 % 1001, 1000});
  CHECK_THROWS_AS(MockGptLowLevelDataset(0, 0), Error);
}

TEST_CASE("Mock data splits 1,1,1 over its 100000 sequences", "[mock]") {
  CHECK(mock_split_range(Split::Train) == std::make_pair<std::int64_t, std::int64_t>(0, 33333));
  CHECK(mock_split_range(Split::Valid) == std::make_pair<std::int64_t, std::int64_t>(33333, 66667));
  CHECK(mock_split_range(Split::Test) == std::make_pair<std::int64_t, std::int64_t>(66667, 100000));
}

TEST_CASE("Mock indices match megatron-core MockGPTDataset", "[mock]") {
  Reference ref = load_reference();
  REQUIRE(ref.configs.size() == 3);
  for (const ConfigLine& c : ref.configs) {
    MockGptLowLevelDataset data(c.eod);
    MockIndexOptions options;
    options.sequence_length = c.seq_length;
    options.random_seed = c.seed;
    for (Split split : kAllSplits) {
      INFO("config " << c.name << ", split " << split_name(split));
      const IndexLine& want = ref.indices.at({c.name, split_name(split)});
      GptDatasetIndex index =
          build_mock_gpt_index(data, split, c.samples[static_cast<std::size_t>(split)], options);
      CHECK(index.size() == want.length);
      CHECK(index.num_epochs == want.epochs);
      CHECK(index.cache_files.empty());
      CHECK(md5_of(index.document_index) == want.document_md5);
      CHECK(dtype_name(index.sample_index.dtype()) == want.sample_dtype);
      CHECK(md5_of(index.sample_index) == want.sample_md5);
      CHECK(dtype_name(index.shuffle_index.dtype()) == want.shuffle_dtype);
      CHECK(md5_of(index.shuffle_index) == want.shuffle_md5);
    }
  }
}

TEST_CASE("Mock samples match megatron-core MockGPTDataset items", "[mock]") {
  Reference ref = load_reference();
  for (const ConfigLine& c : ref.configs) {
    auto readers = mock_sample_readers(sample_options(c), c.seed, c.samples);
    for (Split split : kAllSplits) {
      const auto& reader = readers[static_cast<std::size_t>(split)];
      REQUIRE(reader != nullptr);
      CHECK(reader->size() == ref.indices.at({c.name, split_name(split)}).length);
      for (const SampleLine& want : ref.samples.at({c.name, split_name(split)})) {
        INFO("config " << c.name << ", split " << split_name(split) << ", sample " << want.index);
        GptSample got = reader->get(want.index);
        if (!want.digest.empty()) {
          CHECK(sample_digest(got) == want.digest);
          continue;
        }
        CHECK(got.tokens == want.tokens);
        CHECK(got.labels == want.labels);
        CHECK(got.loss_mask == want.loss_mask);
        CHECK(got.position_ids == want.position_ids);
        CHECK(got.segment_starts == want.segment_starts);
      }
    }
  }
}

TEST_CASE("Mock readers take plain sample counts too", "[mock]") {
  GptSampleOptions o;
  o.sequence_length = 32;
  o.eod = 50256;
  auto readers = mock_sample_readers(o, 1234, std::array<std::int64_t, 3>{1000, 200, 100});
  CHECK(readers[0]->size() == 2130946);
  CHECK(readers[2]->size() == 2133970);
  GptSample first = readers[0]->get(0);
  CHECK(first.tokens.front() == 1047);
  CHECK(first.dataset_id == 0);
}

TEST_CASE("Mock indices reject a bad sequence length", "[mock]") {
  MockGptLowLevelDataset data(0);
  MockIndexOptions options;
  CHECK_THROWS_AS(build_mock_gpt_index(data, Split::Train, 10, options), Error);
}
