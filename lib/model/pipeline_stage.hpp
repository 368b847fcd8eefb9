// Which part of the GPT model one pipeline stage holds: Megatron's split of the decoder layers
// over --pipeline-model-parallel-size stages (megatron/core/transformer/transformer_block.py
// get_num_layers_to_build, transformer_layer.py get_transformer_layer_offset). Pure arithmetic.
//
// Without --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers every stage
// builds num_layers / PP consecutive layers (PP must divide num_layers, as arguments.py asserts).
// With them the first (last) stage builds the given count and the stages between share the rest
// evenly. The first stage also holds the embedding, the last the final norm, the output layer and
// the loss; with tied embeddings the last stage holds its own copy of the word embedding as the
// output weight (Megatron's shared_embedding), kept equal to the first stage's by summing their
// gradients over the embedding group (finalize_model_grads' _allreduce_word_embedding_grads).
// Layers keep their global numbers (names, initialisation, dropout streams), so a stage computes
// exactly its layers of the single-rank model.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace mgt {

// The layers of one stage: [first_layer, first_layer + num_layers) of the whole decoder.
struct PipelineStage {
  int64_t size = 1;         // stages in the pipeline
  int64_t rank = 0;         // this stage, 0 … size − 1
  int64_t first_layer = 0;
  int64_t num_layers = -1;  // −1: every layer (the whole model, no pipeline)

  bool is_first() const { return rank == 0; }
  bool is_last() const { return rank == size - 1; }
  bool whole_model() const { return size == 1; }
  // The layers this stage builds, given the model's total.
  int64_t layers_of(int64_t total_layers) const { return num_layers < 0 ? total_layers : num_layers; }
  bool holds_layer(int64_t layer, int64_t total_layers) const {
    return layer >= first_layer && layer < first_layer + layers_of(total_layers);
  }
};

// Megatron's flags for the split.
struct PipelineSplit {
  int64_t pipeline_size = 1;                    // --pipeline-model-parallel-size
  std::optional<int64_t> first_stage_layers;    // --decoder-first-pipeline-num-layers
  std::optional<int64_t> last_stage_layers;     // --decoder-last-pipeline-num-layers
};

// Every stage of the split, in order; throws a UsageError naming the flags when the layers do
// not divide as Megatron requires (every stage builds at least one layer).
std::vector<PipelineStage> pipeline_stages(int64_t num_layers, const PipelineSplit& split);

// Stage `rank` of the split.
PipelineStage pipeline_stage(int64_t num_layers, const PipelineSplit& split, int64_t rank);

}  // namespace mgt
