// --moe-layer-freq: which layers are MoE layers. Megatron takes an integer N (layer i, from 0, is
// an MoE layer when i % N == 0) or a Python list expression of 1 (MoE) and 0 (dense) made of
// list literals, integers, +, * and parentheses, such as "([0]+[1]*3)*2", whose length must be
// the number of layers (megatron/training/arguments.py moe_freq_type and _eval_pattern,
// megatron/core/models/gpt/gpt_layer_specs.py get_gpt_decoder_block_spec).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace mgt {

// One entry per layer, true for an MoE layer. Throws a UsageError naming --moe-layer-freq when
// the text is neither form, when an integer is not positive, or when the list's length is not
// `num_layers` or holds values other than 0 and 1.
std::vector<bool> moe_layer_pattern(std::string_view text, std::int64_t num_layers);

}  // namespace mgt
