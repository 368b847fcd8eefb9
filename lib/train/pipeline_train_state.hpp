// A pipeline-parallel run's whole tensors brought together on the first stage, for a checkpoint
// that does not depend on the layout that wrote it (see whole_train_state.hpp): each stage's
// tensors, already whole over tensor parallelism (gather_whole_train_state, on tensor-parallel
// rank 0), are sent to stage 0 over the pipeline group, which knows every stage's table from the
// configuration and the split. The last stage's copy of a tied word embedding is not sent: it
// equals the first stage's. A run of any pipeline size then reads the tensors of its own stage.
#pragma once
#include <optional>
#include <vector>

#include "dist/communicator.hpp"
#include "model/gpt_config.hpp"
#include "model/pipeline_stage.hpp"
#include "train/whole_train_state.hpp"

namespace mgt {

// Collective over `pipeline` (the ranks holding each stage's whole tensors: tensor- and
// data-parallel rank 0 of every stage, in stage order). `stage_state` holds this stage's whole
// tensors (and moments when with_optimizer); `stages` is the split of `config`'s layers.
// Returns the whole model's state on stage 0, nullopt on the others.
std::optional<WholeTrainState> gather_pipeline_train_state(WholeTrainState stage_state, const GptConfig& config,
                                                           const std::vector<PipelineStage>& stages,
                                                           dist::Communicator& pipeline, bool with_optimizer);

}  // namespace mgt
