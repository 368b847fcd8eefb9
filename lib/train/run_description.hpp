// What a checkpoint says about the run that wrote it, as JSON text: the arguments (keys are
// Megatron's args names, so tools that read Megatron's saved args find the same fields). The
// tokenizer's record is ckpt/tokenizer_description.hpp, which converted checkpoints write too.
#pragma once
#include <cstdint>
#include <string>

#include "train/train_options.hpp"

namespace mgt {

// Every flag of train_flags() that the table records, after validation, under Megatron's args
// names, then the values no flag sets: padded_vocab_size, params_dtype, ckpt_format, world_size
// and data_parallel_size.
std::string train_args_json(const TrainOptions& options, std::int64_t padded_vocab_size);

}  // namespace mgt
