// The train, validation and test samples of a run: the same indices mgt-index builds for the
// same flags (found in the dataset cache, or built and cached there on the fly), read with
// GPTDataset.__getitem__'s tokens, labels, loss mask and position ids (spec/megatron.md §4.10);
// or, with --mock-data, Megatron's synthetic sequences split "1,1,1" (nothing cached).
#pragma once
#include <array>
#include <memory>

#include "data/gpt_sample.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/train_options.hpp"

namespace mgt {

struct TrainData {
  GptSampleOptions sample_options;
  // Indexed by Split; null for a split that was not built (zero width in --split, or no
  // --valid-data-path / --test-data-path).
  std::array<std::shared_ptr<const SplitSampleReader>, 3> splits;

  const std::shared_ptr<const SplitSampleReader>& train() const { return splits[0]; }
  const std::shared_ptr<const SplitSampleReader>& valid() const { return splits[1]; }
  const std::shared_ptr<const SplitSampleReader>& test() const { return splits[2]; }
};

// The sample options for `options` and `tokenizer` (pad: the tokenizer's, else -1).
GptSampleOptions gpt_sample_options(const TrainOptions& options, const Tokenizer& tokenizer);

// Builds or loads every split's indices (builds the mock ones). Throws mgt::Error (UsageError
// for flags), and when there is no train split. `vocabulary`: the model's (padded) vocabulary,
// against which the samples' token ids are checked as they are read (0: not checked).
TrainData open_train_data(const TrainOptions& options, const Tokenizer& tokenizer, std::int64_t vocabulary = 0);

}  // namespace mgt
