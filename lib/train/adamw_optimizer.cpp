#include "train/adamw_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "kernels/cpu/grad_clip.hpp"

namespace mgt {

namespace {

// The part of entry `e` inside `shard`, in buffer coordinates (empty when they do not meet).
BufferShard overlap(const ParameterEntry& e, const BufferShard& shard) {
  const std::int64_t begin = std::max(e.offset, shard.begin);
  const std::int64_t end = std::min(e.offset + e.numel(), shard.end);
  return {begin, std::max(begin, end)};
}

}  // namespace

std::vector<BufferShard> AdamWOptimizer::counted_ranges(const GptParameters& params, const BufferShard& shard) {
  const TensorParallelRank& tp = params.tensor_parallel();
  // Runs of consecutive counted tensors (the gaps between them included), cut to the shard.
  std::vector<BufferShard> runs;
  bool open = false;
  bool all_counted = true;
  for (const ParameterEntry& e : params.entries()) {
    if (!e.counted_on(tp)) {
      open = false;
      all_counted = false;
      continue;
    }
    if (open) {
      runs.back().end = e.offset + e.numel();
    } else {
      runs.push_back({e.offset, e.offset + e.numel()});
      open = true;
    }
  }
  // Every tensor counts (no tensor parallelism): the shard in one sum, the alignment gaps being
  // zero.
  if (all_counted) return {shard};
  std::vector<BufferShard> ranges;
  for (const BufferShard& r : runs) {
    const std::int64_t begin = std::max(r.begin, shard.begin);
    const std::int64_t end = std::min(r.end, shard.end);
    if (begin < end) ranges.push_back({begin, end});
  }
  return ranges;
}

AdamWOptimizer::AdamWOptimizer(GptParameters& params, const AdamWSettings& settings)
    : params_(&params),
      settings_(settings),
      shard_{0, params.params().size()},
      norm_ranges_(counted_ranges(params, shard_)),
      exp_avg_(params.backend(), shard_.size()),
      exp_avg_sq_(params.backend(), shard_.size()) {
  params.backend().fill(exp_avg_.view(), 0.0f);
  params.backend().fill(exp_avg_sq_.view(), 0.0f);
}

AdamWOptimizer::AdamWOptimizer(GptParameters& params, const AdamWSettings& settings, dist::Communicator& group,
                               bool distributed, dist::Communicator* model_parallel)
    : params_(&params),
      settings_(settings),
      group_(group.size() > 1 ? &group : nullptr),
      model_parallel_(model_parallel && model_parallel->size() > 1 ? model_parallel : nullptr),
      distributed_(distributed),
      shard_(distributed ? data_parallel_shard(params.params().size(), group.size(), group.rank())
                         : BufferShard{0, params.params().size()}),
      norm_ranges_(counted_ranges(params, shard_)),
      exp_avg_(params.backend(), shard_.size()),
      exp_avg_sq_(params.backend(), shard_.size()) {
  params.backend().fill(exp_avg_.view(), 0.0f);
  params.backend().fill(exp_avg_sq_.view(), 0.0f);
}

void AdamWOptimizer::reduce_gradients() {
  if (!group_) return;
  if (distributed_) {
    reduce_scatter_shards(*group_, params_->grads());
  } else {
    group_->all_reduce(params_->grads(), dist::ReduceOp::Sum);
  }
}

OptimizerStep AdamWOptimizer::step(double lr, double weight_decay, bool loss_finite) {
  Backend& backend = params_->backend();
  const FloatView grads = params_->grads().subspan(shard_.begin, shard_.size());
  OptimizerStep result;
  // The alignment gaps of the buffer are zero, so the sum over the buffer is the parameters'.
  // Sharded, every rank contributes its shard's sum (Megatron's get_grad_norm_fp32 all-reduces
  // the squared norm over the data-parallel group of the distributed optimizer), and each
  // tensor-parallel rank its shards' (replicated tensors on rank 0 only).
  double sum_of_squares = 0.0;
  for (const BufferShard& r : norm_ranges_)
    sum_of_squares += backend.sum_of_squares(params_->grads().subspan(r.begin, r.size()));
  if (!loss_finite) sum_of_squares = std::numeric_limits<double>::quiet_NaN();
  if (group_ && distributed_) group_->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  if (model_parallel_) model_parallel_->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  result.grad_norm = std::sqrt(sum_of_squares);
  if (!std::isfinite(result.grad_norm)) return result;

  const double coefficient = cpu::clip_coefficient(result.grad_norm, settings_.clip_grad);
  if (coefficient < 1.0) backend.scale(grads, static_cast<float>(coefficient));

  ++steps_;
  AdamWParams hp;
  hp.lr = static_cast<float>(lr);
  hp.beta1 = static_cast<float>(settings_.beta1);
  hp.beta2 = static_cast<float>(settings_.beta2);
  hp.eps = static_cast<float>(settings_.eps);
  for (const ParameterEntry& e : params_->entries()) {
    const BufferShard part = overlap(e, shard_);
    if (part.size() == 0) continue;
    hp.weight_decay = e.weight_decay ? static_cast<float>(weight_decay) : 0.0f;
    const std::int64_t local = part.begin - shard_.begin;
    backend.adamw_step(params_->params().subspan(part.begin, part.size()),
                       params_->grads().subspan(part.begin, part.size()),
                       exp_avg_.view().subspan(local, part.size()), exp_avg_sq_.view().subspan(local, part.size()),
                       hp, steps_);
  }
  // Megatron's param all-gather: every rank's weights become whole again.
  if (group_ && distributed_) all_gather_shards(*group_, params_->params());
  result.applied = true;
  return result;
}

std::vector<float> AdamWOptimizer::collect_moment(const DeviceBuffer& moment) {
  Backend& backend = params_->backend();
  const int ranks = group_->size();
  const std::int64_t buffer_size = params_->params().size();
  if (group_->rank() != 0) {
    group_->send(moment.view(), 0);
    return {};
  }
  // Data-parallel rank 0 receives each shard straight into its place in the host copy.
  std::vector<float> whole(static_cast<std::size_t>(buffer_size));
  backend.copy_to_host(moment.view(), std::span<float>(whole).subspan(static_cast<std::size_t>(shard_.begin),
                                                                      static_cast<std::size_t>(shard_.size())));
  for (int source = 1; source < ranks; ++source) {
    const BufferShard s = data_parallel_shard(buffer_size, ranks, source);
    group_->recv(std::span<float>(whole).subspan(static_cast<std::size_t>(s.begin), static_cast<std::size_t>(s.size())),
                 source);
  }
  return whole;
}

void AdamWOptimizer::collect_state() {
  if (!group_ || !distributed_) return;
  collected_exp_avg_ = collect_moment(exp_avg_);
  collected_exp_avg_sq_ = collect_moment(exp_avg_sq_);
  collected_ = group_->rank() == 0;
}

void AdamWOptimizer::release_collected_state() {
  collected_ = false;
  collected_exp_avg_ = {};
  collected_exp_avg_sq_ = {};
}

std::vector<float> AdamWOptimizer::read_moment(const DeviceBuffer& moment, const std::vector<float>& collected,
                                               const ParameterEntry& e) const {
  if (shard_.begin == 0 && shard_.end == params_->params().size()) {
    std::vector<float> host(static_cast<std::size_t>(e.numel()));
    params_->backend().copy_to_host(ConstFloatView(moment.view()).subspan(e.offset, e.numel()),
                                     std::span<float>(host));
    return host;
  }
  if (!collected_)
    throw Error("internal error: the distributed optimizer's state of '" + e.name +
                "' read on a rank that did not collect it");
  const auto first = collected.begin() + e.offset;
  return std::vector<float>(first, first + e.numel());
}

void AdamWOptimizer::write_moment(DeviceBuffer& moment, const ParameterEntry& e, std::span<const float> values) {
  if (static_cast<std::int64_t>(values.size()) != e.numel())
    throw Error("optimizer state for '" + e.name + "' has " + std::to_string(values.size()) + " elements, the "
                "parameter has " + std::to_string(e.numel()));
  const BufferShard part = overlap(e, shard_);
  if (part.size() == 0) return;
  params_->backend().copy_from_host(
      values.subspan(static_cast<std::size_t>(part.begin - e.offset), static_cast<std::size_t>(part.size())),
      moment.view().subspan(part.begin - shard_.begin, part.size()));
}

std::vector<float> AdamWOptimizer::read_exp_avg(const ParameterEntry& e) const {
  return read_moment(exp_avg_, collected_exp_avg_, e);
}

std::vector<float> AdamWOptimizer::read_exp_avg_sq(const ParameterEntry& e) const {
  return read_moment(exp_avg_sq_, collected_exp_avg_sq_, e);
}

void AdamWOptimizer::write_exp_avg(const ParameterEntry& e, std::span<const float> values) {
  write_moment(exp_avg_, e, values);
}

void AdamWOptimizer::write_exp_avg_sq(const ParameterEntry& e, std::span<const float> values) {
  write_moment(exp_avg_sq_, e, values);
}

BufferShard AdamWOptimizer::owned_part(const ParameterEntry& e) const { return overlap(e, shard_); }

std::vector<float> AdamWOptimizer::read_owned_moment(const DeviceBuffer& moment, const ParameterEntry& e) const {
  const BufferShard part = overlap(e, shard_);
  std::vector<float> host(static_cast<std::size_t>(std::max<std::int64_t>(part.size(), 0)));
  if (!host.empty())
    params_->backend().copy_to_host(ConstFloatView(moment.view()).subspan(part.begin - shard_.begin, part.size()),
                                     std::span<float>(host));
  return host;
}

std::vector<float> AdamWOptimizer::read_owned_exp_avg(const ParameterEntry& e) const {
  return read_owned_moment(exp_avg_, e);
}

std::vector<float> AdamWOptimizer::read_owned_exp_avg_sq(const ParameterEntry& e) const {
  return read_owned_moment(exp_avg_sq_, e);
}

}  // namespace mgt
