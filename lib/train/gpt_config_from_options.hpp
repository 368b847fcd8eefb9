// The model mgt-train builds from its flags: the GptConfig (and the shape Megatron's FLOP count
// needs) for validated TrainOptions and the tokenizer's padded vocabulary.
#pragma once
#include <cstdint>

#include "model/gpt_config.hpp"
#include "train/flops.hpp"
#include "train/train_options.hpp"

namespace mgt {

// `options` must have been validated (the derived sizes are filled in). The result is resolved.
GptConfig gpt_config_from_options(const TrainOptions& options, std::int64_t padded_vocab_size);

// The shape of one iteration of the global batch, for --log-throughput.
GptFlopsShape gpt_flops_shape(const TrainOptions& options, std::int64_t padded_vocab_size);

}  // namespace mgt
