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
//
// Megatron's interleaved schedule (--num-layers-per-virtual-pipeline-stage /
// --num-virtual-stages-per-pipeline-rank, V model chunks per rank): the layers are cut into P·V
// virtual stages of num_layers / (P·V) layers, and chunk v of rank p holds virtual stage v·P + p
// (get_transformer_layer_offset with a vp_stage). The embedding stays on rank 0 (its chunk 0),
// the output layer and the loss on rank P − 1 (its chunk V − 1).
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
  // Model chunks of this rank (V, interleaved schedule); with V > 1, first_layer is chunk 0's
  // first layer and num_layers the rank's total (V · chunk_layers()).
  int64_t virtual_size = 1;

  bool is_first() const { return rank == 0; }
  bool is_last() const { return rank == size - 1; }
  bool whole_model() const { return size == 1; }
  // The layers this stage builds, given the model's total.
  int64_t layers_of(int64_t total_layers) const { return num_layers < 0 ? total_layers : num_layers; }
  bool holds_layer(int64_t layer, int64_t total_layers) const { return local_index(layer, total_layers) >= 0; }
  bool interleaved() const { return virtual_size > 1; }
  // Layers of one chunk (all of the rank's without interleaving).
  int64_t chunk_layers(int64_t total_layers) const { return layers_of(total_layers) / virtual_size; }
  // The global number of the rank's `local`-th layer (chunk by chunk, in order).
  int64_t layer_at(int64_t local, int64_t total_layers) const {
    if (!interleaved()) return first_layer + local;
    const int64_t per_chunk = chunk_layers(total_layers);
    return ((local / per_chunk) * size + rank) * per_chunk + local % per_chunk;
  }
  // The rank's index of global layer `layer`, or −1 when another rank holds it.
  int64_t local_index(int64_t layer, int64_t total_layers) const {
    if (!interleaved()) {
      return layer >= first_layer && layer < first_layer + layers_of(total_layers) ? layer - first_layer : -1;
    }
    const int64_t per_chunk = chunk_layers(total_layers);
    const int64_t virtual_stage = layer / per_chunk;
    if (layer < 0 || layer >= total_layers || virtual_stage % size != rank) return -1;
    return (virtual_stage / size) * per_chunk + layer % per_chunk;
  }
};

// Megatron's flags for the split.
struct PipelineSplit {
  int64_t pipeline_size = 1;                    // --pipeline-model-parallel-size
  std::optional<int64_t> first_stage_layers;    // --decoder-first-pipeline-num-layers
  std::optional<int64_t> last_stage_layers;     // --decoder-last-pipeline-num-layers
  int64_t virtual_size = 1;                     // model chunks per rank (interleaved schedule)
  // --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: the input
  // embedding (the output layer and loss) counts as one layer of the first (last) stage, which
  // builds one transformer layer fewer (megatron/core/transformer/transformer_block.py
  // get_num_layers_to_build).
  bool embedding_counts_as_layer = false;
  bool loss_counts_as_layer = false;
};

// Every stage of the split, in order; throws a UsageError naming the flags when the layers do
// not divide as Megatron requires (every stage builds at least one layer; with V chunks per
// rank, num_layers divisible by P · V and no uneven first or last stage; with the embedding or
// the loss counted as a layer, num_layers plus those divisible by P, and no uneven first or last
// stage nor interleaving, which mgt does not combine with it).
std::vector<PipelineStage> pipeline_stages(int64_t num_layers, const PipelineSplit& split);

// Stage `rank` of the split.
PipelineStage pipeline_stage(int64_t num_layers, const PipelineSplit& split, int64_t rank);

}  // namespace mgt
