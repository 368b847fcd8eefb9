#include "train/pipeline_train_state.hpp"

#include <map>
#include <span>
#include <string>

#include "core/error.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

std::optional<WholeTrainState> gather_pipeline_train_state(WholeTrainState stage_state, const GptConfig& config,
                                                           const std::vector<PipelineStage>& stages,
                                                           dist::Communicator& pipeline, bool with_optimizer) {
  if (pipeline.size() != static_cast<int>(stages.size()))
    throw Error("internal error: " + std::to_string(stages.size()) + " pipeline stages gathered over " +
                pipeline.description());
  const int stage = pipeline.rank();
  // What a stage sends, in its table's order: whole tensors, the tied copy left out.
  const auto sent_entries = [&](int s) {
    std::vector<ParameterEntry> entries;
    for (ParameterEntry& e : gpt_parameter_table(config, {}, stages[static_cast<size_t>(s)]).entries)
      if (!e.pipeline_duplicate) entries.push_back(std::move(e));
    return entries;
  };
  const auto find = [&](const std::map<std::string, std::vector<float>>& map, const std::string& name) {
    const auto it = map.find(name);
    if (it == map.end()) throw Error("internal error: pipeline stage " + std::to_string(stage) + " lacks '" + name + "'");
    return std::span<const float>(it->second);
  };
  if (stage != 0) {
    for (const ParameterEntry& e : sent_entries(stage)) {
      pipeline.send(find(stage_state.weights, e.name), 0);
      if (!with_optimizer) continue;
      pipeline.send(find(stage_state.exp_avg, e.name), 0);
      pipeline.send(find(stage_state.exp_avg_sq, e.name), 0);
    }
    return std::nullopt;
  }
  WholeTrainState state;
  state.table = gpt_parameter_table(config);
  for (const ParameterEntry& e : sent_entries(0)) {
    state.weights[e.name] = std::move(stage_state.weights.at(e.name));
    if (!with_optimizer) continue;
    state.exp_avg[e.name] = std::move(stage_state.exp_avg.at(e.name));
    state.exp_avg_sq[e.name] = std::move(stage_state.exp_avg_sq.at(e.name));
  }
  const auto receive = [&](std::map<std::string, std::vector<float>>& map, const ParameterEntry& e, int source) {
    std::vector<float>& values = map[e.name];
    values.resize(static_cast<size_t>(e.global_numel()));
    pipeline.recv(std::span<float>(values), source);
  };
  for (int source = 1; source < pipeline.size(); ++source) {
    for (const ParameterEntry& e : sent_entries(source)) {
      receive(state.weights, e, source);
      if (!with_optimizer) continue;
      receive(state.exp_avg, e, source);
      receive(state.exp_avg_sq, e, source);
    }
  }
  for (const ParameterEntry& e : state.table.entries)
    if (!state.weights.count(e.name))
      throw Error("internal error: no pipeline stage holds '" + e.name + "'");
  return state;
}

}  // namespace mgt
