// Reading training samples through Megatron's three GPT indices (shuffle -> sample ->
// document), with GPTDataset.__getitem__'s tokens, labels, loss mask and position ids
// (spec/megatron.md §4.10), for one dataset or a blend of several.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/blended_index.hpp"
#include "data/gpt_dataset_index.hpp"
#include "data/token_source.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct GptSampleOptions {
  std::int64_t sequence_length = 0;
  bool add_extra_token_to_sequence = true;
  TokenId eod = 0;
  // The tokenizer's pad id when it has one, else Megatron's -1. Labels equal to it are masked out
  // of the loss, and it is replaced by 0 in tokens and labels.
  std::int64_t pad = -1;
  bool eod_mask_loss = false;        // --eod-mask-loss
  bool reset_position_ids = false;   // --reset-position-ids
  bool reset_attention_mask = false; // --reset-attention-mask
  // The model's (padded) vocabulary: a token id at or above it, or negative, is an error naming
  // the dataset and the sample. 0: not checked.
  std::int64_t vocabulary = 0;
};

struct GptSample {
  std::vector<std::int64_t> tokens;        // [seq_length]
  std::vector<std::int64_t> labels;        // [seq_length]
  std::vector<float> loss_mask;            // [seq_length]
  std::vector<std::int64_t> position_ids;  // [seq_length]
  // With reset_attention_mask: the positions right after each eod (ascending). A token attends
  // to earlier tokens only from the latest start at or before it. Empty otherwise.
  std::vector<std::int64_t> segment_starts;
  std::vector<std::int64_t> sequence_ids;  // the dataset sequences the sample was cut from
  int dataset_id = 0;                      // member of the blend (0 without a blend)
};

class GptSampleReader {
public:
  // Reads the tokens of index.dataset.
  GptSampleReader(GptDatasetIndex index, GptSampleOptions options);
  // Reads the tokens of `source` (the index's own dataset is not used): Megatron's mock data.
  GptSampleReader(GptDatasetIndex index, std::shared_ptr<const TokenSource> source,
                  GptSampleOptions options);

  std::size_t size() const { return index_.size(); }
  const GptDatasetIndex& index() const { return index_; }

  // The seq_length + add_extra token ids of sample i (after the shuffle), padded with the pad
  // id when the data runs out; appends the sequence ids it read to `sequence_ids` if given.
  std::vector<std::int64_t> text(std::size_t i, std::vector<std::int64_t>* sequence_ids = nullptr) const;

  GptSample get(std::size_t i) const;

private:
  void check() const;
  GptDatasetIndex index_;
  std::shared_ptr<const TokenSource> source_;
  GptSampleOptions options_;
};

// All samples of one split: a single dataset, or a blend that maps each sample to one of its
// members' samples.
class SplitSampleReader {
public:
  SplitSampleReader(std::vector<GptDatasetIndex> datasets, std::optional<BlendedDatasetIndex> blend,
                    GptSampleOptions options);
  // A split of one dataset whose reader is already made.
  explicit SplitSampleReader(GptSampleReader single);

  std::size_t size() const;
  GptSample get(std::size_t i) const;

private:
  std::vector<GptSampleReader> members_;
  std::optional<BlendedDatasetIndex> blend_;
};

// The masks and positions of a sample from its text (exposed for testing).
GptSample make_gpt_sample(const std::vector<std::int64_t>& text, const GptSampleOptions& options);

}  // namespace mgt
