// Megatron's evaluate(): --eval-iters iterations of one global batch each, forward only (no
// dropout), the 'lm loss' reduced as Σ(CE · mask) / Σ mask over all of them. One Evaluator per
// split; its sample iterator continues from one evaluation to the next, as Megatron's
// validation iterator does with the "single" data loader. Across data-parallel ranks each rank
// evaluates its slice of every global batch (the sampler's order, batch_prefetcher.hpp) and the
// sums are all-reduced over the group, as Megatron's evaluate() does. With pipeline stages the
// micro-batches pass through the stages forward only (pipeline_executor.hpp); the last stage's
// sums reach every stage.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "data/gpt_sample.hpp"
#include "dist/communicator.hpp"
#include "model/gpt_model.hpp"
#include "train/batch_prefetcher.hpp"
#include "train/pipeline_executor.hpp"
#include "train/training_log.hpp"

namespace mgt {

struct EvaluationSettings {
  std::int64_t start_sample = 0;  // consumed samples of the split so far
  std::int64_t micro_batch_size = 1;
  std::int64_t num_microbatches = 1;  // per iteration and rank: global batch / (micro batch · DP)
  // The data-parallel group (null: one rank); must outlive the evaluator.
  dist::Communicator* data_parallel = nullptr;
  // The pipeline-parallel group when the model is one stage of several (null: the whole model);
  // must outlive the evaluator.
  dist::Communicator* pipeline = nullptr;
  std::int64_t microbatch_group_size = 0;  // the interleaved schedule's (pipeline_executor.hpp)
  std::int64_t eval_iters = 0;        // --eval-iters
  std::string split_name = "valid";
  bool cyclic = false;         // --dataloader-type cyclic (train/sample_order.hpp)
  bool data_sharding = true;
  // Called with each micro-batch's loss sums where the loss is computed (--check-for-spiky-loss:
  // Megatron's loss_func validates evaluation losses too); empty: none.
  std::function<void(const LossSum&)> loss_observer;
};

class Evaluator {
public:
  // A split smaller than what the evaluations need is read again from its start.
  Evaluator(GptModel& model, std::shared_ptr<const SplitSampleReader> reader, const EvaluationSettings& settings);

  // {"lm loss", value}; advances the iterator by eval_iters global batches.
  LossValues evaluate();
  // Over all data-parallel ranks.
  std::int64_t samples_per_evaluation() const {
    return settings_.eval_iters * settings_.num_microbatches * settings_.micro_batch_size * data_parallel_size();
  }

private:
  std::int64_t data_parallel_size() const { return settings_.data_parallel ? settings_.data_parallel->size() : 1; }

  GptModel* model_;
  std::unique_ptr<PipelineExecutor> pipeline_;
  EvaluationSettings settings_;
  BatchPrefetcher batches_;
};

}  // namespace mgt
