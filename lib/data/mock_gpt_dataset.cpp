#include "data/mock_gpt_dataset.hpp"

#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/gpt_index_arrays.hpp"
#include "data/numpy_generator.hpp"
#include "data/numpy_random.hpp"

namespace mgt {

MockGptLowLevelDataset::MockGptLowLevelDataset(std::int64_t eod,
                                               std::optional<std::int64_t> token_modulus)
    : lengths_(NumpyGenerator(kSeed).integers_int32(1, kMaxSequenceLength, kSize)),
      eod_(eod),
      token_modulus_(token_modulus) {
  if (token_modulus_ && *token_modulus_ <= 0)
    throw Error("internal error: mock data needs a positive vocabulary size to wrap tokens");
}

std::int32_t MockGptLowLevelDataset::sequence_length(std::size_t i) const {
  if (i >= lengths_.size())
    throw Error("mock data: sequence " + std::to_string(i) + " out of range (" +
                std::to_string(lengths_.size()) + " sequences)");
  return lengths_[i];
}

void MockGptLowLevelDataset::read(std::size_t sequence, std::size_t offset, std::size_t length,
                                  std::int64_t* out) const {
  auto len = static_cast<std::size_t>(sequence_length(sequence));
  if (offset > len || length > len - offset)
    throw Error("mock data: read of tokens [" + std::to_string(offset) + ", " +
                std::to_string(offset + length) + ") past the end of sequence " +
                std::to_string(sequence) + " of length " + std::to_string(len));
  // Token p of a sequence is p + 1, except the last one, which is eod.
  for (std::size_t k = 0; k < length; ++k) {
    std::size_t p = offset + k;
    auto value = static_cast<std::int64_t>(p + 1);
    if (token_modulus_) value %= *token_modulus_;
    out[k] = p + 1 < len ? value : eod_;
  }
}

std::pair<std::int64_t, std::int64_t> mock_split_range(Split split) {
  static const SplitMatrix matrix = split_matrix(parse_split(kMockSplit));
  return split_range(*matrix[static_cast<std::size_t>(split)], MockGptLowLevelDataset::kSize);
}

GptDatasetIndex build_mock_gpt_index(const MockGptLowLevelDataset& data, Split split,
                                     std::optional<std::int64_t> num_samples,
                                     const MockIndexOptions& options) {
  if (options.sequence_length <= 0) throw UsageError("--seq-length must be positive");
  if (num_samples && *num_samples < 0)
    throw Error("internal error: a negative number of mock samples requested");
  const int add_extra = options.add_extra_token_to_sequence ? 1 : 0;
  GptDatasetIndex index;
  index.dataset_path = "mock data";
  index.split = split;
  index.sequence_range = mock_split_range(split);
  index.num_samples = num_samples;

  std::span<const std::int32_t> sizes = data.sequence_lengths();
  std::vector<std::int32_t> documents;
  for (std::int64_t i = index.sequence_range.first; i < index.sequence_range.second; ++i) {
    documents.push_back(static_cast<std::int32_t>(i));
    index.tokens_per_epoch += sizes[static_cast<std::size_t>(i)];
  }
  EpochPlan plan = plan_epochs(index.tokens_per_epoch, num_samples, options.sequence_length, add_extra);
  index.num_epochs = plan.num_epochs;
  index.separate_final_epoch = plan.separate_final_epoch;

  check_index_memory("the mock data's " + std::string(split_name(split)) + " split",
                     static_cast<std::int64_t>(documents.size()), index.tokens_per_epoch, plan,
                     options.sequence_length);
  log::info("Build the MockGPTDataset " + std::string(split_name(split)) + " indices (not cached)");
  // One RandomState per split, used for the document index and then the shuffle index.
  NumpyRandomState random(options.random_seed);
  auto document_index =
      build_document_index(documents, plan.num_epochs, plan.separate_final_epoch, random);
  bool drop_last = split == Split::Valid ? options.drop_last_partial_validation_sequence : true;
  index.sample_index = build_sample_index(sizes, document_index, options.sequence_length,
                                          plan.num_epochs, index.tokens_per_epoch, drop_last,
                                          add_extra);
  const std::size_t entries = document_index.size();
  index.document_index = NpyArray::from_vector(std::move(document_index), {entries});
  std::int64_t total = static_cast<std::int64_t>(index.sample_index.shape()[0]) - 1;
  index.shuffle_index = build_shuffle_index(
      plan.separate_final_epoch ? plan.samples_sans_final_epoch : total, total, random);
  log::info("> total number of samples: " + std::to_string(total));
  log::info("> total number of epochs: " + std::to_string(plan.num_epochs));
  return index;
}

std::array<std::shared_ptr<const SplitSampleReader>, 3> mock_sample_readers(
    const GptSampleOptions& sample_options, std::uint32_t seed,
    const std::array<std::optional<std::int64_t>, 3>& num_samples,
    std::optional<std::int64_t> token_modulus) {
  // One low-level dataset behind all three splits, as Megatron's builder makes it.
  auto data = std::make_shared<const MockGptLowLevelDataset>(sample_options.eod, token_modulus);
  MockIndexOptions index_options;
  index_options.sequence_length = sample_options.sequence_length;
  index_options.random_seed = seed;
  index_options.add_extra_token_to_sequence = sample_options.add_extra_token_to_sequence;
  std::array<std::shared_ptr<const SplitSampleReader>, 3> readers;
  for (Split split : kAllSplits) {
    auto s = static_cast<std::size_t>(split);
    GptDatasetIndex index = build_mock_gpt_index(*data, split, num_samples[s], index_options);
    readers[s] = std::make_shared<const SplitSampleReader>(
        GptSampleReader(std::move(index), data, sample_options));
  }
  return readers;
}

std::array<std::shared_ptr<const SplitSampleReader>, 3> mock_sample_readers(
    const GptSampleOptions& sample_options, std::uint32_t seed,
    const std::array<std::int64_t, 3>& num_samples,
    std::optional<std::int64_t> token_modulus) {
  return mock_sample_readers(sample_options, seed,
                             std::array<std::optional<std::int64_t>, 3>{
                                 num_samples[0], num_samples[1], num_samples[2]},
                             token_modulus);
}

}  // namespace mgt
