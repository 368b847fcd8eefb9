#include "train/train_data.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/index_job.hpp"
#include "data/mock_gpt_dataset.hpp"

namespace mgt {

GptSampleOptions gpt_sample_options(const TrainOptions& options, const Tokenizer& tokenizer) {
  GptSampleOptions s;
  s.sequence_length = options.model.seq_length.value_or(0);
  s.add_extra_token_to_sequence = true;
  s.eod = tokenizer.eod();
  s.pad = tokenizer.pad() ? *tokenizer.pad() : -1;
  s.eod_mask_loss = options.data.eod_mask_loss;
  s.reset_position_ids = options.data.reset_position_ids;
  s.reset_attention_mask = options.data.reset_attention_mask;
  return s;
}

namespace {

// Megatron v0.13's mock tokens run up to 4094 whatever the vocabulary; later versions take them
// modulo the vocabulary size, which changes nothing where v0.13 works and lets a small
// vocabulary train on mock data too.
TrainData open_mock_data(const TrainOptions& options, const Tokenizer& tokenizer) {
  if (options.optim.seed < 0 || options.optim.seed > 0xffffffffLL)
    throw UsageError("--seed must be between 0 and 4294967295 (NumPy's RandomState range)");
  TrainData data;
  data.sample_options = gpt_sample_options(options, tokenizer);
  data.splits = mock_sample_readers(data.sample_options, static_cast<std::uint32_t>(options.optim.seed),
                                    requested_samples(index_options(options)), tokenizer.vocab_size());
  return data;
}

}  // namespace

TrainData open_train_data(const TrainOptions& options, const Tokenizer& tokenizer, std::int64_t vocabulary) {
  log::info("> building train, validation, and test datasets ...");
  if (options.data.mock_data) {
    TrainData data = open_mock_data(options, tokenizer);
    log::info("> finished creating mock GPT datasets ...");
    return data;
  }
  IndexResult result = build_indices(index_options(options), tokenizer);
  TrainData data;
  data.sample_options = gpt_sample_options(options, tokenizer);
  data.sample_options.vocabulary = vocabulary;
  for (Split s : kAllSplits) {
    auto& entry = result.splits[static_cast<std::size_t>(s)];
    if (!entry) continue;
    data.splits[static_cast<std::size_t>(s)] = std::make_shared<const SplitSampleReader>(
        std::move(entry->datasets), std::move(entry->blend), data.sample_options);
  }
  if (!data.train())
    throw UsageError("there is no train split to train on (check --split or --train-data-path)");
  log::info("> finished creating GPT datasets ...");
  return data;
}

}  // namespace mgt
