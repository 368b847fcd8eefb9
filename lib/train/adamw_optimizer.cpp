#include "train/adamw_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "kernels/grad_clip.hpp"

namespace mgt {

namespace {

// The part of entry `e` inside `shard`, in buffer coordinates (empty when they do not meet).
BufferShard overlap(const ParameterEntry& e, const BufferShard& shard) {
  const std::int64_t begin = std::max(e.offset, shard.begin);
  const std::int64_t end = std::min(e.offset + e.numel(), shard.end);
  return {begin, std::max(begin, end)};
}

}  // namespace

std::vector<ElementRange> AdamWOptimizer::counted_ranges(const GptParameters& params, const BufferShard& shard) {
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
  if (all_counted) return {{shard.begin, shard.size()}};
  std::vector<ElementRange> ranges;
  for (const BufferShard& r : runs) {
    const std::int64_t begin = std::max(r.begin, shard.begin);
    const std::int64_t end = std::min(r.end, shard.end);
    if (begin < end) ranges.push_back({begin, end - begin});
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
  build_segments();
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
  build_segments();
}

void AdamWOptimizer::build_segments() {
  // Runs of the shard with the same weight decay and learning rate (the embedding and output
  // layer take --decoupled-lr); alignment gaps (zero weights and gradients, which the update
  // leaves zero) join plain runs.
  segment_ends_.clear();
  segment_flags_.clear();
  const auto add = [&](std::int64_t end, std::int64_t flags) {
    if (end <= (segment_ends_.empty() ? 0 : segment_ends_.back())) return;
    if (!segment_flags_.empty() && segment_flags_.back() == flags) {
      segment_ends_.back() = end;
    } else {
      segment_ends_.push_back(end);
      segment_flags_.push_back(flags);
    }
  };
  for (const ParameterEntry& e : params_->entries()) {
    const BufferShard part = overlap(e, shard_);
    if (part.size() == 0) continue;
    add(part.begin - shard_.begin, 0);
    add(part.end - shard_.begin, (e.weight_decay ? kAdamWDecay : 0) |
                                     (is_embedding_or_output_parameter(e) ? kAdamWDecoupledLr : 0));
  }
  add(shard_.size(), 0);
}

void AdamWOptimizer::reduce_gradients() {
  if (!group_) return;
  if (distributed_) {
    reduce_scatter_shards(*group_, params_->grads());
  } else {
    group_->all_reduce(params_->grads(), dist::ReduceOp::Sum);
  }
}

double AdamWOptimizer::count_zeros_in_grads() {
  const std::vector<float> grads = [&] {
    std::vector<float> host(static_cast<std::size_t>(params_->grads().size()));
    params_->backend().copy_to_host(params_->grads(), host);
    return host;
  }();
  const TensorParallelRank& tp = params_->tensor_parallel();
  double zeros = 0.0;
  for (const ParameterEntry& e : params_->entries()) {
    if (!e.counted_on(tp)) continue;
    const BufferShard part = overlap(e, shard_);
    for (std::int64_t i = part.begin; i < part.end; ++i) zeros += grads[static_cast<std::size_t>(i)] == 0.0f ? 1.0 : 0.0;
  }
  // Megatron's grad_stats_parallel_group: the model-parallel group, and with the distributed
  // optimizer its data-parallel ranks too (each counts its shard).
  if (group_ && distributed_) group_->all_reduce(std::span<double>(&zeros, 1), dist::ReduceOp::Sum);
  if (model_parallel_) model_parallel_->all_reduce(std::span<double>(&zeros, 1), dist::ReduceOp::Sum);
  return zeros;
}

OptimizerStep AdamWOptimizer::step(const StepRequest& request) {
  const double lr = request.lr;
  const double weight_decay = request.weight_decay;
  const bool loss_finite = request.loss_finite;
  Backend& backend = params_->backend();
  const FloatView grads = params_->grads().subspan(shard_.begin, shard_.size());
  OptimizerStep result;
  // The alignment gaps of the buffer are zero, so the sum over the buffer is the parameters'.
  // Sharded, every rank contributes its shard's sum (Megatron's get_grad_norm_fp32 all-reduces
  // the squared norm over the data-parallel group of the distributed optimizer), and each
  // tensor-parallel rank its shards' (replicated tensors on rank 0 only): runs between the
  // replicated tensors, summed in one pass with one read back.
  double sum_of_squares = backend.sum_of_squares(params_->grads(), norm_ranges_);
  if (!loss_finite) sum_of_squares = std::numeric_limits<double>::quiet_NaN();
  if (group_ && distributed_) group_->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  if (model_parallel_) model_parallel_->all_reduce(std::span<double>(&sum_of_squares, 1), dist::ReduceOp::Sum);
  result.grad_norm = std::sqrt(sum_of_squares);
  if (!std::isfinite(result.grad_norm)) return result;

  const double coefficient = clip_coefficient(result.grad_norm, settings_.clip_grad);
  // Megatron's MegatronOptimizer.step counts after clipping: on an iteration that counts, the
  // gradients are clipped in place first, and the update then reads them unscaled.
  float grad_scale = coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
  if (request.count_zeros) {
    if (grad_scale != 1.0f) backend.scale(grads, grad_scale);
    grad_scale = 1.0f;
    result.num_zeros = count_zeros_in_grads();
  }

  ++steps_;
  AdamWParams hp;
  hp.beta1 = static_cast<float>(settings_.beta1);
  hp.beta2 = static_cast<float>(settings_.beta2);
  hp.eps = static_cast<float>(settings_.eps);
  hp.lr = static_cast<float>(lr);
  hp.weight_decay = static_cast<float>(weight_decay);
  // One pass over the shard: clipping folded into the read of the gradient, the embedding and
  // output layer at --decoupled-lr, and the bf16 compute copy written beside the weights. With
  // the distributed optimizer the other shards arrive by an all-gather: of the fp32 weights
  // below, after which the copy is refreshed before the next forward, or of the copy itself
  // (OverlappedDataParallel::start_param_gather).
  const bool writes_copy = !params_->compute_copy().empty();
  const FloatView copy = writes_copy ? params_->compute_copy().subspan(shard_.begin, shard_.size())
                                     : FloatView();
  backend.adamw_update(params_->params().subspan(shard_.begin, shard_.size()), grads, exp_avg_.view(),
                       exp_avg_sq_.view(), segment_ends_, segment_flags_, hp,
                       static_cast<float>(request.decoupled_lr.value_or(lr)), grad_scale, steps_, copy);
  if (writes_copy && !(group_ && distributed_)) params_->mark_compute_copy_fresh();
  // Megatron's param all-gather: every rank's weights become whole again.
  if (group_ && distributed_ && !param_gather_deferred_) all_gather_shards(*group_, params_->params());
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
