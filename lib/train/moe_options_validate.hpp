// The checks of Megatron's validate_args (megatron/training/arguments.py) and TransformerConfig
// (megatron/core/transformer/transformer_config.py __post_init__) on the Mixture-of-Experts flags,
// as usage errors naming the flags, and the defaults they fill in. Part of validate_train_options.
#pragma once

#include "train/train_options.hpp"

namespace mgt {

// Needs the model's flags validated first (--ffn-hidden-size filled in); fills
// --moe-ffn-hidden-size and --expert-tensor-parallel-size as Megatron does.
void validate_moe_options(TrainOptions& o);

}  // namespace mgt
