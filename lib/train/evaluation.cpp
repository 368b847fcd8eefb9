#include "train/evaluation.hpp"

#include <algorithm>
#include <span>

namespace mgt {

namespace {

BatchPrefetcher::Settings prefetch_settings(const EvaluationSettings& s) {
  BatchPrefetcher::Settings p;
  p.start_sample = s.start_sample;
  p.micro_batch_size = s.micro_batch_size;
  if (s.data_parallel) {
    p.data_parallel_size = s.data_parallel->size();
    p.data_parallel_rank = s.data_parallel->rank();
  }
  p.capacity = static_cast<std::size_t>(std::max<std::int64_t>(2, s.num_microbatches));
  p.wrap = true;
  p.cyclic = s.cyclic;
  p.data_sharding = s.data_sharding;
  p.split_name = s.split_name;
  return p;
}

}  // namespace

Evaluator::Evaluator(GptModel& model, std::shared_ptr<const SplitSampleReader> reader,
                     const EvaluationSettings& settings)
    : model_(&model), settings_(settings), batches_(std::move(reader), prefetch_settings(settings)) {
  if (settings.pipeline && settings.pipeline->size() > 1)
    pipeline_ = std::make_unique<PipelineExecutor>(model, *settings.pipeline, settings.microbatch_group_size);
  if (pipeline_) pipeline_->set_loss_observer(settings.loss_observer);
}

LossValues Evaluator::evaluate() {
  double loss_sum = 0.0;
  double token_count = 0.0;
  for (std::int64_t it = 0; it < settings_.eval_iters; ++it) {
    if (pipeline_) {
      const LossSum s = pipeline_->evaluate(settings_.num_microbatches, [&] { return batches_.next(); });
      loss_sum += s.loss_sum;
      token_count += s.token_count;
      continue;
    }
    for (std::int64_t m = 0; m < settings_.num_microbatches; ++m) {
      const HostMicroBatch batch = batches_.next();
      const ForwardOutput out = model_->forward_only(batch.view());
      loss_sum += out.loss.loss_sum;
      token_count += out.loss.token_count;
      if (settings_.loss_observer) settings_.loss_observer(out.loss);
    }
  }
  // Megatron all-reduces [Σ loss, Σ tokens] over the data-parallel group.
  double sums[2] = {loss_sum, token_count};
  if (settings_.data_parallel) settings_.data_parallel->all_reduce(std::span<double>(sums), dist::ReduceOp::Sum);
  return {{"lm loss", sums[0] / sums[1]}};
}

}  // namespace mgt
