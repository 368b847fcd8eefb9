#include "train/virtual_pipeline_options.hpp"

#include <set>
#include <string>

#include "core/error.hpp"
#include "train/interleaved_schedule.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Micro-batches per iteration of every global batch size the run reaches.
std::set<std::int64_t> microbatch_counts(const TrainOptions& o) {
  const std::int64_t unit = *o.optim.micro_batch_size * o.parallel.data_parallel_size;
  std::set<std::int64_t> counts{*o.optim.global_batch_size / unit};
  if (o.optim.rampup_batch_size && o.optim.train_samples) {
    const GlobalBatchSizeSchedule schedule = o.global_batch_size_schedule();
    for (std::int64_t size : schedule.batch_sizes_used(schedule.train_iters(*o.optim.train_samples)))
      counts.insert(size / unit);
  }
  return counts;
}

}  // namespace

void validate_virtual_pipeline(TrainOptions& o) {
  ParallelOptions& p = o.parallel;
  const auto& per_stage = p.num_layers_per_virtual_pipeline_stage;
  const auto& per_rank = p.num_virtual_stages_per_pipeline_rank;
  if (per_stage && per_rank)
    throw UsageError("No more than one of --num-layers-per-virtual-pipeline-stage and "
                     "--num-virtual-stages-per-pipeline-rank can be set at the same time");
  for (const auto& [value, flag] : {std::pair{per_stage, "--num-layers-per-virtual-pipeline-stage"},
                                    std::pair{per_rank, "--num-virtual-stages-per-pipeline-rank"},
                                    std::pair{p.microbatch_group_size_per_virtual_pipeline_stage,
                                              "--microbatch-group-size-per-virtual-pipeline-stage"}})
    if (value && *value < 1) throw UsageError(std::string(flag) + " must be at least 1 (got " + str(*value) + ")");

  const std::int64_t pp = p.pipeline_model_parallel_size;
  p.virtual_pipeline_model_parallel_size = 1;
  if (per_stage) {
    if (p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers)
      throw UsageError("please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree "
                       "when enable uneven pipeline parallelism (--decoder-first/last-pipeline-num-layers)");
    const std::int64_t layers = *o.model.num_layers;
    if (layers % pp != 0)
      throw UsageError("--num-layers (" + str(layers) + ") must be divisible by --pipeline-model-parallel-size (" +
                       str(pp) + ")");
    if ((layers / pp) % *per_stage != 0)
      throw UsageError("the layers per pipeline stage (" + str(layers / pp) + ") must be divisible by "
                       "--num-layers-per-virtual-pipeline-stage (" + str(*per_stage) + ")");
    p.virtual_pipeline_model_parallel_size = (layers / pp) / *per_stage;
  } else if (per_rank) {
    p.virtual_pipeline_model_parallel_size = *per_rank;
  }

  const std::int64_t vp = p.virtual_pipeline_model_parallel_size;
  if (vp == 1) {
    if (p.microbatch_group_size_per_virtual_pipeline_stage)
      throw UsageError("--microbatch-group-size-per-virtual-pipeline-stage needs the interleaved schedule "
                       "(--num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank "
                       "giving more than one model chunk per pipeline rank)");
    return;
  }
  if (pp < 2)
    throw UsageError("When interleaved schedule is used, --pipeline-model-parallel-size should be greater than 1");
  // The shape of every iteration's schedule (schedules.py raises these at the iteration).
  for (std::int64_t m : microbatch_counts(o))
    check_interleaved_shape({pp, vp, m, p.microbatch_group_size_per_virtual_pipeline_stage.value_or(0)});
}

std::string schedule_description(const ParallelOptions& p) {
  if (p.virtual_pipeline_model_parallel_size == 1) return "1F1B schedule";
  return "interleaved 1F1B schedule, " + str(p.virtual_pipeline_model_parallel_size) +
         " model chunks per stage, micro-batch groups of " +
         str(p.microbatch_group_size_per_virtual_pipeline_stage.value_or(p.pipeline_model_parallel_size));
}

}  // namespace mgt
