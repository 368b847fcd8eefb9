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
  if (all_counted) {
    if (shard.size() == 0) return {};
    return {{shard.begin, shard.size()}};
  }
  std::vector<ElementRange> ranges;
  for (const BufferShard& r : runs) {
    const std::int64_t begin = std::max(r.begin, shard.begin);
    const std::int64_t end = std::min(r.end, shard.end);
    if (begin < end) ranges.push_back({begin, end - begin});
  }
  return ranges;
}

void AdamWOptimizer::add_region(BufferShard range, dist::Communicator* group, dist::Communicator* norm_group) {
  Region r;
  r.range = range;
  r.group = group && group->size() > 1 ? group : nullptr;
  r.norm_group = norm_group && norm_group->size() > 1 ? norm_group : nullptr;
  r.shard = range;
  if (distributed_ && r.group) {
    const BufferShard local = data_parallel_shard(range.size(), r.group->size(), r.group->rank());
    r.shard = {range.begin + local.begin, range.begin + local.end};
  }
  r.moment_offset = regions_.empty() ? 0 : regions_.back().moment_offset + regions_.back().shard.size();
  r.norm_ranges = counted_ranges(*params_, r.shard);
  build_segments(*params_, r);
  regions_.push_back(std::move(r));
}

AdamWOptimizer::AdamWOptimizer(GptParameters& params, const AdamWSettings& settings)
    : params_(&params), settings_(settings) {
  add_region({0, params.params().size()}, nullptr, nullptr);
  allocate_moments(regions_.back().shard.size());
}

void AdamWOptimizer::allocate_moments(std::int64_t size) {
  exp_avg_ = DeviceBuffer(params_->backend(), size, settings_.exp_avg_type);
  exp_avg_sq_ = DeviceBuffer(params_->backend(), size, settings_.exp_avg_sq_type);
  params_->backend().fill(exp_avg_.view(), 0.0f);
  params_->backend().fill(exp_avg_sq_.view(), 0.0f);
}

AdamWOptimizer::AdamWOptimizer(GptParameters& params, const AdamWSettings& settings, dist::Communicator& group,
                               bool distributed, dist::Communicator* model_parallel,
                               const ExpertGradientGroups& experts)
    : params_(&params),
      settings_(settings),
      group_(group.size() > 1 ? &group : nullptr),
      distributed_(distributed) {
  const std::int64_t size = params.params().size();
  const std::int64_t expert_begin = params.table().expert_begin;
  const bool expert_groups = experts.expert_data_parallel && experts.expert_tensor_model_pipeline;
  if (expert_begin < size && !expert_groups)
    throw Error("internal error: a model with expert-parallel tensors given no expert groups");
  add_region({0, expert_begin}, group_, model_parallel);
  // Under expert parallelism on every stage, empty on one without MoE layers: the experts' norm
  // group spans the pipeline stages, and all of its ranks take part in the norm's reduction.
  if (expert_groups)
    add_region({expert_begin, size}, experts.expert_data_parallel, experts.expert_tensor_model_pipeline);
  allocate_moments(regions_.back().moment_offset + regions_.back().shard.size());
}

void AdamWOptimizer::add_fp8_param_gather(Fp8ParamGather& gather) {
  const BufferShard range = gather.region();
  for (Region& r : regions_) {
    if (r.range.begin != range.begin || r.range.end != range.end) continue;
    r.fp8_gather = &gather;
    return;
  }
  throw Error("internal error: --fp8-param-gather's all-gather of [" + std::to_string(range.begin) + ", " +
              std::to_string(range.end) + ") matches no region of the distributed optimizer");
}

std::vector<BufferShard> AdamWOptimizer::shards() const {
  std::vector<BufferShard> result;
  for (const Region& r : regions_) result.push_back(r.shard);
  return result;
}

const AdamWOptimizer::Region& AdamWOptimizer::region_of(const ParameterEntry& e) const {
  for (const Region& r : regions_)
    if (e.offset >= r.range.begin && e.offset < r.range.end) return r;
  return regions_.front();  // an empty tensor at the very end
}

void AdamWOptimizer::build_segments(const GptParameters& params, Region& region) {
  // Runs of the shard with the same weight decay and learning rate (the embedding and output
  // layer take --decoupled-lr); alignment gaps (zero weights and gradients, which the update
  // leaves zero) join plain runs.
  const BufferShard shard = region.shard;
  std::vector<std::int64_t>& ends = region.segment_ends;
  std::vector<std::int64_t>& flags_of = region.segment_flags;
  const auto add = [&](std::int64_t end, std::int64_t flags) {
    if (end <= (ends.empty() ? 0 : ends.back())) return;
    if (!flags_of.empty() && flags_of.back() == flags) {
      ends.back() = end;
    } else {
      ends.push_back(end);
      flags_of.push_back(flags);
    }
  };
  for (const ParameterEntry& e : params.entries()) {
    const BufferShard part = overlap(e, shard);
    if (part.size() == 0) continue;
    add(part.begin - shard.begin, 0);
    add(part.end - shard.begin, (e.weight_decay ? kAdamWDecay : 0) |
                                    (is_embedding_or_output_parameter(e) ? kAdamWDecoupledLr : 0));
  }
  add(shard.size(), 0);
}

void AdamWOptimizer::reduce_gradients(std::int64_t from) {
  for (const Region& r : regions_) {
    if (!r.group || r.range.begin < from || r.range.size() == 0) continue;
    const FloatView grads = bf16_ ? bf16_->round(r.range.begin, r.range.end)
                                  : params_->grads().subspan(r.range.begin, r.range.size());
    if (distributed_) {
      reduce_scatter_shards(*r.group, grads);
    } else {
      r.group->all_reduce(grads, dist::ReduceOp::Sum);
    }
    if (bf16_) bf16_->take_back(r.range.begin, r.range.end);
  }
}

double AdamWOptimizer::reduce_over_regions(const std::vector<double>& per_region) {
  // Sharded, each element of a region lies in exactly one shard of one rank of its group.
  double total = 0.0;
  for (std::size_t i = 0; i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    double v = per_region[i];
    if (distributed_ && r.group) r.group->all_reduce(std::span<double>(&v, 1), dist::ReduceOp::Sum);
    if (r.norm_group) r.norm_group->all_reduce(std::span<double>(&v, 1), dist::ReduceOp::Sum);
    total += v;
  }
  return total;
}

double AdamWOptimizer::count_zeros_in_grads() {
  const std::vector<float> grads = [&] {
    std::vector<float> host(static_cast<std::size_t>(params_->grads().size()));
    params_->backend().copy_to_host(params_->grads(), host);
    return host;
  }();
  const TensorParallelRank& tp = params_->tensor_parallel();
  std::vector<double> zeros(regions_.size(), 0.0);
  for (const ParameterEntry& e : params_->entries()) {
    if (!e.counted_on(tp)) continue;
    const Region& r = region_of(e);
    const BufferShard part = overlap(e, r.shard);
    double& z = zeros[static_cast<std::size_t>(&r - regions_.data())];
    for (std::int64_t i = part.begin; i < part.end; ++i) z += grads[static_cast<std::size_t>(i)] == 0.0f ? 1.0 : 0.0;
  }
  // Megatron's grad_stats_parallel_group: the model-parallel group, and with the distributed
  // optimizer its data-parallel ranks too (each counts its shard).
  return reduce_over_regions(zeros);
}

OptimizerStep AdamWOptimizer::step(const StepRequest& request) {
  const double lr = request.lr;
  const double weight_decay = request.weight_decay;
  const bool loss_finite = request.loss_finite;
  Backend& backend = params_->backend();
  OptimizerStep result;
  // The alignment gaps of the buffer are zero, so the sum over the buffer is the parameters'.
  // Sharded, every rank contributes its shard's sum (Megatron's get_grad_norm_fp32 all-reduces
  // the squared norm over the data-parallel group of the distributed optimizer), and each
  // tensor-parallel rank its shards' (replicated tensors on rank 0 only): runs between the
  // replicated tensors, summed in one pass with one read back (per region).
  std::vector<double> sums;
  for (const Region& r : regions_) sums.push_back(backend.sum_of_squares(params_->grads(), r.norm_ranges));
  if (!loss_finite) sums.front() = std::numeric_limits<double>::quiet_NaN();
  const double sum_of_squares = reduce_over_regions(sums);
  result.grad_norm = std::sqrt(sum_of_squares);
  if (!std::isfinite(result.grad_norm)) return result;

  const double coefficient = clip_coefficient(result.grad_norm, settings_.clip_grad);
  // Megatron's MegatronOptimizer.step counts after clipping: on an iteration that counts, the
  // gradients are clipped in place first, and the update then reads them unscaled.
  float grad_scale = coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
  if (request.count_zeros) {
    if (grad_scale != 1.0f)
      for (const Region& r : regions_)
        backend.scale(params_->grads().subspan(r.shard.begin, r.shard.size()), grad_scale);
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
  // (OverlappedDataParallel::start_param_gather); under --fp8-param-gather the FP8 linear layers'
  // weights travel as FP8 codes cast from the updated shards (train/fp8_param_gather.hpp).
  const bool writes_copy = !params_->compute_copy().empty();
  bool gathered = false;
  for (const Region& r : regions_) {
    const FloatView copy = writes_copy ? params_->compute_copy().subspan(r.shard.begin, r.shard.size()) : FloatView();
    // An empty shard: the experts' region of a stage without MoE layers.
    if (r.shard.size() > 0)
      backend.adamw_update(params_->params().subspan(r.shard.begin, r.shard.size()),
                           params_->grads().subspan(r.shard.begin, r.shard.size()),
                           exp_avg_.view().subspan(r.moment_offset, r.shard.size()),
                           exp_avg_sq_.view().subspan(r.moment_offset, r.shard.size()), r.segment_ends,
                           r.segment_flags, hp, static_cast<float>(request.decoupled_lr.value_or(lr)), grad_scale,
                           steps_, copy);
    // Megatron's param all-gather: every rank's weights become whole again.
    if (r.sharded() && !param_gather_deferred_) {
      if (r.fp8_gather)
        r.fp8_gather->gather();
      else
        all_gather_shards(*r.group, params_->params().subspan(r.range.begin, r.range.size()));
    }
    gathered = gathered || r.sharded();
  }
  if (writes_copy && !gathered) params_->mark_compute_copy_fresh();
  result.applied = true;
  return result;
}

std::vector<float> AdamWOptimizer::collect_moment(const DeviceBuffer& moment) {
  Backend& backend = params_->backend();
  const std::int64_t buffer_size = params_->params().size();
  std::vector<float> whole;
  for (const Region& r : regions_) {
    const ConstFloatView mine = ConstFloatView(moment.view()).subspan(r.moment_offset, r.shard.size());
    const int rank = r.group ? r.group->rank() : 0;
    if (rank != 0) {
      // Sent as floats, which rank 0 receives into its host copy.
      DeviceBuffer widened;
      if (!mine.is_fp32()) {
        widened = DeviceBuffer(backend, mine.size());
        backend.convert(mine, widened.view());
      }
      r.group->send(mine.is_fp32() ? mine : ConstFloatView(widened.view()), 0);
      continue;
    }
    // Rank 0 of the region's group receives each shard straight into its place in the host copy.
    whole.resize(static_cast<std::size_t>(buffer_size));
    backend.copy_to_host(mine, std::span<float>(whole).subspan(static_cast<std::size_t>(r.shard.begin),
                                                               static_cast<std::size_t>(r.shard.size())));
    for (int source = 1; r.group && source < r.group->size(); ++source) {
      const BufferShard s = data_parallel_shard(r.range.size(), r.group->size(), source);
      r.group->recv(std::span<float>(whole).subspan(static_cast<std::size_t>(r.range.begin + s.begin),
                                                    static_cast<std::size_t>(s.size())),
                    source);
    }
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
  const Region& r = region_of(e);
  if (!r.sharded()) {
    std::vector<float> host(static_cast<std::size_t>(e.numel()));
    params_->backend().copy_to_host(
        ConstFloatView(moment.view()).subspan(r.moment_offset + e.offset - r.shard.begin, e.numel()),
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
  const Region& r = region_of(e);
  const BufferShard part = overlap(e, r.shard);
  if (part.size() == 0) return;
  params_->backend().copy_from_host(
      values.subspan(static_cast<std::size_t>(part.begin - e.offset), static_cast<std::size_t>(part.size())),
      moment.view().subspan(r.moment_offset + part.begin - r.shard.begin, part.size()));
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

BufferShard AdamWOptimizer::owned_part(const ParameterEntry& e) const { return overlap(e, region_of(e).shard); }

std::vector<float> AdamWOptimizer::read_owned_moment(const DeviceBuffer& moment, const ParameterEntry& e) const {
  const Region& r = region_of(e);
  const BufferShard part = overlap(e, r.shard);
  std::vector<float> host(static_cast<std::size_t>(std::max<std::int64_t>(part.size(), 0)));
  if (!host.empty())
    params_->backend().copy_to_host(
        ConstFloatView(moment.view()).subspan(r.moment_offset + part.begin - r.shard.begin, part.size()),
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
