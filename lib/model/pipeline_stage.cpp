#include "model/pipeline_stage.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// V chunks per rank, each of num_layers / (P·V) layers (megatron/training/arguments.py: the
// layers per pipeline rank divisible by the layers per virtual stage).
std::vector<PipelineStage> interleaved_stages(int64_t num_layers, const PipelineSplit& split) {
  const int64_t pp = split.pipeline_size;
  const int64_t vp = split.virtual_size;
  if (pp < 2)
    throw UsageError("the interleaved schedule (--num-layers-per-virtual-pipeline-stage / "
                     "--num-virtual-stages-per-pipeline-rank) needs --pipeline-model-parallel-size > 1");
  if (split.first_stage_layers || split.last_stage_layers)
    throw UsageError("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers are not "
                     "implemented with the interleaved schedule in mgt-train");
  if (split.embedding_counts_as_layer || split.loss_counts_as_layer)
    throw UsageError("--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split are not "
                     "implemented with the interleaved schedule in mgt-train");
  if (num_layers % (pp * vp) != 0)
    throw UsageError("--num-layers (" + str(num_layers) + ") must be divisible by --pipeline-model-parallel-size (" +
                     str(pp) + ") times the virtual stages per pipeline rank (" + str(vp) +
                     ") with the interleaved schedule");
  std::vector<PipelineStage> stages;
  const int64_t per_chunk = num_layers / (pp * vp);
  for (int64_t r = 0; r < pp; ++r) stages.push_back(PipelineStage{pp, r, r * per_chunk, per_chunk * vp, vp});
  return stages;
}

}  // namespace

std::vector<PipelineStage> pipeline_stages(int64_t num_layers, const PipelineSplit& split) {
  const int64_t pp = split.pipeline_size;
  if (pp < 1) throw UsageError("--pipeline-model-parallel-size must be positive (got " + str(pp) + ")");
  const bool uneven = split.first_stage_layers || split.last_stage_layers;
  if (split.virtual_size < 1) throw UsageError("the virtual pipeline size must be positive (got " + str(split.virtual_size) + ")");
  if (split.virtual_size > 1) return interleaved_stages(num_layers, split);
  if (uneven && pp == 1)
    throw UsageError("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers need "
                     "--pipeline-model-parallel-size > 1");
  for (const auto& [given, flag] : {std::pair{split.first_stage_layers, "--decoder-first-pipeline-num-layers"},
                                    std::pair{split.last_stage_layers, "--decoder-last-pipeline-num-layers"}}) {
    if (given && *given <= 0) throw UsageError(std::string(flag) + " must be positive (got " + str(*given) + ")");
  }

  const bool accounted = split.embedding_counts_as_layer || split.loss_counts_as_layer;
  if (accounted && uneven)  // TransformerConfig's __post_init__
    throw UsageError("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers cannot be set "
                     "with --account-for-embedding-in-pipeline-split or --account-for-loss-in-pipeline-split");
  std::vector<int64_t> counts(static_cast<size_t>(pp), 0);
  if (accounted) {
    const int64_t embedding = split.embedding_counts_as_layer ? 1 : 0;
    const int64_t loss = split.loss_counts_as_layer ? 1 : 0;
    const int64_t total = num_layers + embedding + loss;
    if (total % pp != 0)
      throw UsageError("--num-layers (" + str(num_layers) + ") plus the " +
                       (embedding && loss ? "embedding and the loss" : embedding ? "embedding" : "loss") + " (" +
                       str(total) + ") must be divisible by --pipeline-model-parallel-size (" + str(pp) + ")");
    counts.assign(static_cast<size_t>(pp), total / pp);
    counts.front() -= embedding;
    counts.back() -= loss;
    for (int64_t r = 0; r < pp; ++r)
      if (counts[static_cast<size_t>(r)] <= 0)
        throw UsageError("--num-layers (" + str(num_layers) + ") over " + str(pp) + " pipeline stages, the " +
                         (r == 0 ? "embedding" : "loss") + " counted as a layer, leaves stage " + str(r) +
                         " no transformer layer: a stage of the " + (r == 0 ? "embedding" : "loss") +
                         " alone is not implemented in mgt-train");
  } else if (!uneven) {
    if (num_layers % pp != 0)
      throw UsageError("--num-layers (" + str(num_layers) + ") must be divisible by --pipeline-model-parallel-size (" +
                       str(pp) + "), or give --decoder-first-pipeline-num-layers / "
                       "--decoder-last-pipeline-num-layers");
    counts.assign(static_cast<size_t>(pp), num_layers / pp);
  } else {
    // The stages between the first and last share what those two do not build.
    int64_t rest = num_layers;
    int64_t middle = pp;
    if (split.first_stage_layers) {
      rest -= *split.first_stage_layers;
      --middle;
    }
    if (split.last_stage_layers) {
      rest -= *split.last_stage_layers;
      --middle;
    }
    const std::string flags = "--num-layers " + str(num_layers) +
                              (split.first_stage_layers
                                   ? ", --decoder-first-pipeline-num-layers " + str(*split.first_stage_layers)
                                   : std::string()) +
                              (split.last_stage_layers
                                   ? ", --decoder-last-pipeline-num-layers " + str(*split.last_stage_layers)
                                   : std::string());
    if (middle == 0 && rest != 0)
      throw UsageError(flags + ": the first and last stages must build all " + str(num_layers) +
                       " layers when the pipeline has no other stage");
    if (middle > 0 && (rest < middle || rest % middle != 0))
      throw UsageError(flags + ": the " + str(rest) + " remaining layers must divide evenly (at least one each) over the " +
                       str(middle) + " other pipeline stage" + (middle == 1 ? "" : "s"));
    for (int64_t r = 0; r < pp; ++r) counts[static_cast<size_t>(r)] = middle > 0 ? rest / middle : 0;
    if (split.first_stage_layers) counts.front() = *split.first_stage_layers;
    if (split.last_stage_layers) counts.back() = *split.last_stage_layers;
  }
  if (pp > 1 && counts.front() == 0)
    throw UsageError("--num-layers (" + str(num_layers) + ") leaves no layer for some of the " + str(pp) +
                     " pipeline stages");

  std::vector<PipelineStage> stages;
  int64_t first = 0;
  for (int64_t r = 0; r < pp; ++r) {
    const int64_t n = counts[static_cast<size_t>(r)];
    stages.push_back(PipelineStage{pp, r, first, pp == 1 ? -1 : n});
    first += n;
  }
  return stages;
}

PipelineStage pipeline_stage(int64_t num_layers, const PipelineSplit& split, int64_t rank) {
  const std::vector<PipelineStage> stages = pipeline_stages(num_layers, split);
  if (rank < 0 || rank >= static_cast<int64_t>(stages.size()))
    throw Error("pipeline stage " + str(rank) + " is outside a pipeline of " + str(split.pipeline_size));
  return stages[static_cast<size_t>(rank)];
}

}  // namespace mgt
