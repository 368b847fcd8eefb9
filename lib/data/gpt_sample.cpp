#include "data/gpt_sample.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {

GptSampleReader::GptSampleReader(GptDatasetIndex index, GptSampleOptions options)
    : index_(std::move(index)), options_(options) {
  if (!index_.dataset) throw Error("internal error: a sample reader without its dataset");
  source_ = std::make_shared<const IndexedTokenSource>(index_.dataset);
  check();
}

GptSampleReader::GptSampleReader(GptDatasetIndex index, std::shared_ptr<const TokenSource> source,
                                 GptSampleOptions options)
    : index_(std::move(index)), source_(std::move(source)), options_(options) {
  if (!source_) throw Error("internal error: a sample reader without its token source");
  check();
}

void GptSampleReader::check() const {
  if (options_.sequence_length <= 0) throw Error("internal error: sequence length must be positive");
}

std::vector<std::int64_t> GptSampleReader::text(std::size_t i,
                                                std::vector<std::int64_t>* sequence_ids) const {
  if (i >= size())
    throw Error("sample " + std::to_string(i) + " out of range: " + index_.dataset_path + " " +
                split_name(index_.split) + " has " + std::to_string(size()));
  const std::int64_t extra = options_.add_extra_token_to_sequence ? 1 : 0;
  const std::size_t want = static_cast<std::size_t>(options_.sequence_length + extra);
  auto row = static_cast<std::size_t>(index_.shuffle_index.get(i));
  std::int64_t begin = index_.sample_index.get(2 * row), begin_offset = index_.sample_index.get(2 * row + 1);
  std::int64_t end = index_.sample_index.get(2 * row + 2), end_offset = index_.sample_index.get(2 * row + 3);
  const TokenSource& data = *source_;

  std::vector<std::int64_t> out;
  out.reserve(want);
  auto append = [&](std::int64_t position, std::int64_t offset, std::optional<std::int64_t> length) {
    auto sequence = static_cast<std::size_t>(index_.document_index.get(static_cast<std::size_t>(position)));
    if (sequence_ids) sequence_ids->push_back(static_cast<std::int64_t>(sequence));
    std::int64_t available = data.sequence_length(sequence) - offset;
    std::int64_t n = length ? *length : available;
    if (offset < 0 || n < 0 || n > available)
      throw Error(index_.dataset_path + ": sample " + std::to_string(i) + " reads tokens [" +
                  std::to_string(offset) + ", " + std::to_string(offset + n) + ") of sequence " +
                  std::to_string(sequence) + " of length " +
                  std::to_string(data.sequence_length(sequence)) + " (stale cached index?)");
    std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(n));
    data.read(sequence, static_cast<std::size_t>(offset), static_cast<std::size_t>(n), out.data() + at);
  };
  if (begin == end) {
    append(begin, begin_offset, end_offset - begin_offset + extra);
  } else {
    for (std::int64_t k = begin; k <= end; ++k) {
      std::int64_t offset = k > begin ? 0 : begin_offset;
      std::optional<std::int64_t> length;
      if (k == end) length = end_offset + extra;
      append(k, offset, length);
    }
  }
  if (out.size() > want)
    throw Error(index_.dataset_path + ": sample " + std::to_string(i) + " spans " +
                std::to_string(out.size()) + " tokens, more than " + std::to_string(want) +
                " (stale cached index?)");
  out.resize(want, options_.pad);
  return out;
}

GptSample make_gpt_sample(const std::vector<std::int64_t>& text, const GptSampleOptions& options) {
  const std::size_t s = static_cast<std::size_t>(options.sequence_length);
  GptSample out;
  if (options.add_extra_token_to_sequence) {
    if (text.size() != s + 1) throw Error("internal error: sample text of the wrong length");
    out.tokens.assign(text.begin(), text.end() - 1);
    out.labels.assign(text.begin() + 1, text.end());
  } else {
    if (text.size() != s) throw Error("internal error: sample text of the wrong length");
    out.tokens = text;
    out.labels.assign(text.begin() + 1, text.end());
    out.labels.push_back(options.pad);
  }
  out.loss_mask.assign(s, 1.0f);
  out.position_ids.resize(s);
  std::int64_t segment_start = 0;
  for (std::size_t p = 0; p < s; ++p) {
    out.position_ids[p] = static_cast<std::int64_t>(p) - segment_start;
    if (out.tokens[p] == options.eod) {
      if (options.eod_mask_loss) out.loss_mask[p] = 0.0f;
      if (options.reset_position_ids) segment_start = static_cast<std::int64_t>(p) + 1;
      if (options.reset_attention_mask && p + 1 < s)
        out.segment_starts.push_back(static_cast<std::int64_t>(p) + 1);
    }
  }
  for (std::size_t p = 0; p < s; ++p) {
    if (out.labels[p] == options.pad) {
      out.loss_mask[p] = 0.0f;
      out.labels[p] = 0;
    }
    if (out.tokens[p] == options.pad) out.tokens[p] = 0;
  }
  return out;
}

GptSample GptSampleReader::get(std::size_t i) const {
  std::vector<std::int64_t> ids;
  const std::vector<std::int64_t> tokens = text(i, &ids);
  if (options_.vocabulary > 0) {
    // Data tokenized with a larger vocabulary than the model's: named here, where the dataset is
    // known, rather than by the model's embedding.
    for (const std::int64_t t : tokens) {
      if (t != options_.pad && (t < 0 || t >= options_.vocabulary))
        throw Error(index_.dataset_path + ": sample " + std::to_string(i) + " holds token id " + std::to_string(t) +
                    ", outside the model's vocabulary of " + std::to_string(options_.vocabulary) +
                    " (was the data tokenized with another tokenizer than --tokenizer-type's?)");
    }
  }
  GptSample sample = make_gpt_sample(tokens, options_);
  sample.sequence_ids = std::move(ids);
  return sample;
}

SplitSampleReader::SplitSampleReader(std::vector<GptDatasetIndex> datasets,
                                     std::optional<BlendedDatasetIndex> blend,
                                     GptSampleOptions options)
    : blend_(std::move(blend)) {
  if (datasets.empty()) throw Error("internal error: a split without datasets");
  if (!blend_ && datasets.size() != 1) throw Error("internal error: several datasets without a blend");
  for (auto& d : datasets) members_.emplace_back(std::move(d), options);
}

SplitSampleReader::SplitSampleReader(GptSampleReader single) { members_.push_back(std::move(single)); }

std::size_t SplitSampleReader::size() const {
  return blend_ ? blend_->size() : members_[0].size();
}

GptSample SplitSampleReader::get(std::size_t i) const {
  if (!blend_) return members_[0].get(i);
  if (i >= blend_->size())
    throw Error("blended sample " + std::to_string(i) + " out of range (" +
                std::to_string(blend_->size()) + ")");
  auto member = static_cast<std::size_t>(blend_->dataset_index.get(i));
  auto sample = static_cast<std::size_t>(blend_->dataset_sample_index.get(i));
  if (member >= members_.size()) throw Error("blended sample names a missing dataset");
  GptSample s = members_[member].get(sample);
  s.dataset_id = static_cast<int>(member);
  return s;
}

}  // namespace mgt
