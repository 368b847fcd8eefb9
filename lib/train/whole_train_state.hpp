// A tensor-parallel run's weights and Adam moments made whole again: the single-rank (TP = 1)
// tensors, to compare a tensor-parallel run's state with a one-rank run's (checkpoints no longer
// need it: each rank saves its own shards, train_checkpoint.hpp).
//
// Each tensor-parallel rank holds its shard of every partitioned tensor: each shard is sent to
// tensor-parallel rank 0 and put back in its place along the tensor's partition
// (unshard_tensor), and a replicated tensor is taken from rank 0.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "model/gpt_parameters.hpp"
#include "model/parameter_table.hpp"
#include "train/adamw_optimizer.hpp"

namespace mgt {

struct WholeTrainState {
  ParameterTable table;  // the single-rank table of the model: what the tensors below are
  std::map<std::string, std::vector<float>> weights;
  // Empty unless gathered with the optimizer state.
  std::map<std::string, std::vector<float>> exp_avg;
  std::map<std::string, std::vector<float>> exp_avg_sq;
};

// Collective over `tensor_parallel`, the group of the ranks holding params' other shards: every
// rank of it calls with its own parameters (and, with_optimizer, an optimizer whose moments it
// can read: after collect_state() with the distributed optimizer, on data-parallel rank 0).
// Returns the whole state on tensor-parallel rank 0, nullopt on the others. Host memory: the
// whole weights and moments, once.
std::optional<WholeTrainState> gather_whole_train_state(const GptParameters& params, const AdamWOptimizer& optimizer,
                                                        dist::Communicator& tensor_parallel, bool with_optimizer);

}  // namespace mgt
