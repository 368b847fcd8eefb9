#include "ckpt/vocabulary_resize.hpp"

#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

namespace {

const char* const kVocabularyTensors[] = {"embedding.word_embeddings.weight", "output_layer.weight"};

}  // namespace

VocabularyChange resize_vocabulary(ModelWeights& weights, std::optional<std::int64_t> true_vocab_size,
                                   std::optional<std::int64_t> divisible_by) {
  VocabularyChange change;
  change.source_rows = weights.config.padded_vocab_size;
  change.true_vocab_size = true_vocab_size;
  if (true_vocab_size && (*true_vocab_size < 1 || *true_vocab_size > change.source_rows))
    throw UsageError("--true-vocab-size " + std::to_string(*true_vocab_size) + " must be between 1 and the " +
                     std::to_string(change.source_rows) + " rows of the word embedding of " + weights.source);
  if (divisible_by && *divisible_by < 1) throw UsageError("--make-vocab-size-divisible-by must be >= 1");
  const std::int64_t kept = true_vocab_size.value_or(change.source_rows);
  change.destination_rows = divisible_by ? padded_vocab_size(kept, *divisible_by, 1) : kept;
  if (change.destination_rows == change.source_rows) return change;

  const JsonScalars tokenizer(weights.tokenizer_json, "the tokenizer description of " + weights.source);
  if (tokenizer.contains("true_vocab_size") && tokenizer.show("true_vocab_size") != "null" &&
      tokenizer.integer("true_vocab_size") > change.destination_rows)
    throw Error("--true-vocab-size " + std::to_string(kept) + " would drop tokens of the tokenizer of " +
                weights.source + ", which has " + tokenizer.show("true_vocab_size"));
  if (kept < change.source_rows)
    log::warn("--true-vocab-size " + std::to_string(kept) + " drops " + std::to_string(change.source_rows - kept) +
              " rows of the word embedding: their logits no longer take part in the softmax, so the "
              "converted model's probabilities differ slightly from the original's");

  const std::size_t hidden = static_cast<std::size_t>(weights.config.hidden_size);
  for (const char* name : kVocabularyTensors) {
    auto it = weights.tensors.find(name);
    if (it == weights.tensors.end()) continue;
    // Rows kept as they are, new padding rows zero.
    it->second.resize(static_cast<std::size_t>(kept) * hidden);
    it->second.resize(static_cast<std::size_t>(change.destination_rows) * hidden, 0.0f);
  }
  weights.config.padded_vocab_size = change.destination_rows;
  weights.args_json.clear();
  return change;
}

}  // namespace mgt
