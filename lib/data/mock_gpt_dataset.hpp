// Megatron's --mock-data (megatron-core v0.13 MockGPTLowLevelDataset and MockGPTDataset,
// spec/megatron.md §4.9): synthetic sequences whose lengths come from NumPy's default_rng(0),
// split "1,1,1" into train, valid and test, indexed and read exactly like a GPTDataset, so that
// training on mock data sees the samples Megatron would. Nothing is cached on disk.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "data/dataset_split.hpp"
#include "data/gpt_dataset_index.hpp"
#include "data/gpt_sample.hpp"
#include "data/token_source.hpp"

namespace mgt {

// MockGPTLowLevelDataset: sequence i holds 1, 2, ..., length_i - 1 and then the eod token.
// In v0.13 nothing bounds the tokens by the vocabulary: they reach 4094, which a model with a
// smaller (padded) vocabulary cannot embed. Later Megatron versions take them modulo the
// tokenizer's vocab_size; `token_modulus` reproduces that when given.
class MockGptLowLevelDataset final : public TokenSource {
public:
  static constexpr std::size_t kSize = 100000;
  static constexpr std::int32_t kMaxSequenceLength = 4096;  // exclusive bound on lengths
  static constexpr std::uint64_t kSeed = 0;                 // fixed, whatever --seed is

  explicit MockGptLowLevelDataset(std::int64_t eod,
                                  std::optional<std::int64_t> token_modulus = std::nullopt);

  std::size_t sequence_count() const override { return lengths_.size(); }
  std::int32_t sequence_length(std::size_t i) const override;
  void read(std::size_t sequence, std::size_t offset, std::size_t length,
            std::int64_t* out) const override;

  std::span<const std::int32_t> sequence_lengths() const { return lengths_; }
  std::int64_t eod() const { return eod_; }

private:
  std::vector<std::int32_t> lengths_;
  std::int64_t eod_;
  std::optional<std::int64_t> token_modulus_;
};

// The GPTDataset fields that shape a mock split's indices.
struct MockIndexOptions {
  std::int64_t sequence_length = 0;        // --seq-length
  std::uint32_t random_seed = 1234;        // --seed: shuffles, not the mock lengths
  bool add_extra_token_to_sequence = true;
  bool drop_last_partial_validation_sequence = true;
};

// Megatron's split of the mock data: "1,1,1", whatever --split says.
inline constexpr const char* kMockSplit = "1,1,1";

// The sequences [begin, end) of one split of the mock data.
std::pair<std::int64_t, std::int64_t> mock_split_range(Split split);

// MockGPTDataset's document, sample and shuffle indices for one split (num_samples: requested;
// none means one epoch), built as for a GPTDataset and never cached. `dataset` of the result is
// empty: read it through the mock token source.
GptDatasetIndex build_mock_gpt_index(const MockGptLowLevelDataset& data, Split split,
                                     std::optional<std::int64_t> num_samples,
                                     const MockIndexOptions& options);

// The train, valid and test readers of --mock-data, in Split order (all three always exist).
// `sample_options` gives the sequence length, the extra token, eod, pad and the mask flags; eod
// also ends every mock sequence (v0.13 takes it from the tokenizer, and nothing else of the
// tokenizer, not even the vocabulary size, shapes mock data). `seed` is --seed; `num_samples`
// are the requested sample counts per split (requested_samples(); none: one epoch).
// `token_modulus`: see MockGptLowLevelDataset (absent for v0.13).
std::array<std::shared_ptr<const SplitSampleReader>, 3> mock_sample_readers(
    const GptSampleOptions& sample_options, std::uint32_t seed,
    const std::array<std::optional<std::int64_t>, 3>& num_samples,
    std::optional<std::int64_t> token_modulus = std::nullopt);
std::array<std::shared_ptr<const SplitSampleReader>, 3> mock_sample_readers(
    const GptSampleOptions& sample_options, std::uint32_t seed,
    const std::array<std::int64_t, 3>& num_samples,
    std::optional<std::int64_t> token_modulus = std::nullopt);

}  // namespace mgt
