#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/gpt_index_arrays.hpp"
#include "data/gpt_sample.hpp"
#include "test_paths.hpp"

using namespace mgt;

namespace {

constexpr TokenId kEod = 9;

// Sequences: [10..14], [20..22], [30..36].
std::shared_ptr<const IndexedDataset> three_sequences(const std::string& prefix) {
  IndexedDatasetWriter w(prefix, DType::Int32);
  for (auto [first, n] : std::vector<std::pair<int, int>>{{10, 5}, {20, 3}, {30, 7}}) {
    std::vector<TokenId> t(static_cast<std::size_t>(n));
    std::iota(t.begin(), t.end(), first);
    std::vector<std::int32_t> l = {n};
    w.add_document(t, l);
  }
  w.finalize();
  return std::make_shared<const IndexedDataset>(prefix);
}

// Indices in reading order (identity shuffle) over documents 0, 1, 2.
GptDatasetIndex in_order(std::shared_ptr<const IndexedDataset> data, bool drop_last) {
  GptDatasetIndex index;
  index.dataset = data;
  index.dataset_path = data->prefix();
  std::vector<std::int32_t> docs = {0, 1, 2};
  index.sample_index = build_sample_index(data->sequence_lengths(), docs, 4, 1, 15, drop_last, 1);
  index.document_index = NpyArray::from_vector(std::move(docs), {3});
  std::size_t n = index.sample_index.shape()[0] - 1;
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0U);
  index.shuffle_index = NpyArray::from_vector(std::move(order), {n});
  return index;
}

GptSampleOptions options() {
  GptSampleOptions o;
  o.sequence_length = 4;
  o.eod = kEod;
  return o;
}

}  // namespace

TEST_CASE("samples follow the indices and share their boundary token", "[index]") {
  auto dir = test::scratch_dir("gpt_sample_read");
  GptSampleReader reader(in_order(three_sequences(dir + "/d"), true), options());
  REQUIRE(reader.size() == 3);
  auto s0 = reader.get(0);
  CHECK(s0.tokens == std::vector<std::int64_t>{10, 11, 12, 13});
  CHECK(s0.labels == std::vector<std::int64_t>{11, 12, 13, 14});
  CHECK(s0.sequence_ids == std::vector<std::int64_t>{0});
  auto s1 = reader.get(1);  // crosses all three documents
  CHECK(s1.tokens == std::vector<std::int64_t>{14, 20, 21, 22});
  CHECK(s1.labels == std::vector<std::int64_t>{20, 21, 22, 30});
  CHECK(s1.sequence_ids == std::vector<std::int64_t>{0, 1, 2});
  CHECK(s1.loss_mask == std::vector<float>{1, 1, 1, 1});
  CHECK(s1.position_ids == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(reader.get(2).tokens == std::vector<std::int64_t>{30, 31, 32, 33});
  CHECK_THROWS_AS(reader.get(3), Error);
}

TEST_CASE("a partial last sample is padded and masked", "[index]") {
  auto dir = test::scratch_dir("gpt_sample_pad");
  GptSampleReader reader(in_order(three_sequences(dir + "/d"), false), options());
  REQUIRE(reader.size() == 4);
  CHECK(reader.text(3) == std::vector<std::int64_t>{34, 35, 36, -1, -1});
  auto s = reader.get(3);
  CHECK(s.tokens == std::vector<std::int64_t>{34, 35, 36, 0});
  CHECK(s.labels == std::vector<std::int64_t>{35, 36, 0, 0});
  CHECK(s.loss_mask == std::vector<float>{1, 1, 0, 0});
}

TEST_CASE("eod masking and position/attention resets", "[index]") {
  auto o = options();
  o.sequence_length = 6;
  std::vector<std::int64_t> text = {1, 2, kEod, 3, 4, kEod, 5};
  auto plain = make_gpt_sample(text, o);
  CHECK(plain.loss_mask == std::vector<float>{1, 1, 1, 1, 1, 1});
  CHECK(plain.position_ids == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(plain.segment_starts.empty());

  o.eod_mask_loss = true;
  o.reset_position_ids = true;
  o.reset_attention_mask = true;
  auto reset = make_gpt_sample(text, o);
  CHECK(reset.tokens == std::vector<std::int64_t>{1, 2, kEod, 3, 4, kEod});
  CHECK(reset.labels == std::vector<std::int64_t>{2, kEod, 3, 4, kEod, 5});
  CHECK(reset.loss_mask == std::vector<float>{1, 1, 0, 1, 1, 0});
  CHECK(reset.position_ids == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2});
  CHECK(reset.segment_starts == std::vector<std::int64_t>{3});

  // Without the extra token the labels roll left and end with the pad id (masked).
  o = options();
  o.add_extra_token_to_sequence = false;
  auto rolled = make_gpt_sample({5, 6, 7, 8}, o);
  CHECK(rolled.labels == std::vector<std::int64_t>{6, 7, 8, 0});
  CHECK(rolled.loss_mask == std::vector<float>{1, 1, 1, 0});

  // A tokenizer with a real pad id (BERT's 0) masks labels equal to it.
  o = options();
  o.pad = 0;
  CHECK(make_gpt_sample({0, 4, 0, 6, 7}, o).loss_mask == std::vector<float>{1, 0, 1, 1});
}

TEST_CASE("a blended split reads each member's samples", "[index]") {
  auto dir = test::scratch_dir("gpt_sample_blend");
  auto a = in_order(three_sequences(dir + "/a"), true);
  auto b = in_order(three_sequences(dir + "/b"), true);
  auto blend_indices = build_blending_indices(std::vector<double>{0.5, 0.5}, 4);
  BlendedDatasetIndex blend;
  blend.dataset_index = NpyArray::from_vector(std::move(blend_indices.dataset_index), {4});
  blend.dataset_sample_index = NpyArray::from_vector(std::move(blend_indices.dataset_sample_index), {4});
  SplitSampleReader reader({a, b}, blend, options());
  REQUIRE(reader.size() == 4);
  auto s0 = reader.get(0), s1 = reader.get(1), s2 = reader.get(2);
  CHECK(s0.dataset_id == 0);
  CHECK(s1.dataset_id == 1);
  CHECK(s0.tokens == s1.tokens);  // sample 0 of each member
  CHECK(s2.tokens == std::vector<std::int64_t>{14, 20, 21, 22});
  CHECK_THROWS_AS(reader.get(4), Error);

  SplitSampleReader single({a}, std::nullopt, options());
  CHECK(single.size() == 3);
  CHECK(single.get(1).dataset_id == 0);
}
