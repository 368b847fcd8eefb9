// Changing the number of rows of a model's word embedding (and untied output layer) during a
// conversion, as Megatron's converters do with --true-vocab-size and
// --make-vocab-size-divisible-by. Megatron trains with the vocabulary padded (50257 → 50304 for
// GPT-2), and the padding rows' logits take part in the softmax; keeping them (the default) keeps
// the model's outputs exactly the same.
#pragma once
#include <cstdint>
#include <optional>

#include "ckpt/model_weights.hpp"

namespace mgt {

struct VocabularyChange {
  std::int64_t source_rows = 0;
  std::optional<std::int64_t> true_vocab_size;
  std::int64_t destination_rows = 0;
};

// true_vocab_size N keeps the first N rows; then divisible_by D pads with zero rows up to a
// multiple of D (Megatron's padding, tensor parallelism 1). Neither: the rows stay as they are.
// Warns on standard error when rows are dropped (the softmax changes). Throws mgt::UsageError
// when N exceeds the rows there are, and mgt::Error when the result would drop tokens of the
// tokenizer the weights record.
VocabularyChange resize_vocabulary(ModelWeights& weights, std::optional<std::int64_t> true_vocab_size,
                                   std::optional<std::int64_t> divisible_by);

}  // namespace mgt
