#include "train/overlapped_data_parallel.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "dist/buffer_shards.hpp"

namespace mgt {

OverlappedDataParallel::OverlappedDataParallel(GptParameters& params, std::vector<GradientBucket> buckets,
                                               dist::Communicator& group, bool distributed, Bf16GradientCopy* bf16,
                                               const ExpertParameterRegion& experts)
    : params_(&params),
      buckets_(std::move(buckets)),
      group_(&group),
      distributed_(distributed),
      bf16_(bf16),
      started_(buckets_.size(), false),
      reductions_(buckets_.size()),
      gathers_(buckets_.size()),
      experts_(experts) {
  if (!experts_.group || experts_.group->size() == 1 || experts_.begin >= experts_.end) experts_ = {};
  // The buckets cover [0, n): the whole buffer, or the parameters before the experts' (whose
  // gradients AdamWOptimizer reduces over their own group after the backward).
  std::int64_t n = 0;
  for (const GradientBucket& b : buckets_) n = std::max(n, b.end);
  per_rank_ = n / group.size();
  even_ = per_rank_ * group.size();
  gathers_compute_copy_ = distributed && !params.compute_copy().empty() && !params.forward_reads_params();
}

std::vector<std::int64_t> OverlappedDataParallel::shard_counts(std::int64_t begin, std::int64_t end) const {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(group_->size()), 0);
  for (int r = 0; r < group_->size(); ++r) {
    const std::int64_t lo = std::max(begin, r * per_rank_);
    const std::int64_t hi = std::min(end, (r + 1) * per_rank_);
    counts[static_cast<std::size_t>(r)] = std::max<std::int64_t>(0, hi - lo);
  }
  return counts;
}

void OverlappedDataParallel::arm() { armed_ = true; }

void OverlappedDataParallel::start_reduction(std::size_t index) {
  started_[index] = true;
  if (group_->size() == 1) return;
  const GradientBucket& b = buckets_[index];
  if (bf16_) bf16_->round(b.begin, b.end);
  const FloatView grads = bf16_ ? bf16_->whole() : params_->grads();
  std::vector<dist::PendingCollective>& pending = reductions_[index];
  if (!distributed_) {
    pending.push_back(group_->start_all_reduce(dist::backend_buffer(grads.subspan(b.begin, b.size())),
                                               dist::ReduceOp::Sum));
    return;
  }
  // The evenly split prefix: each rank's part of the bucket reduced onto it; the remainder:
  // summed on every rank (reduce_scatter_shards).
  const std::int64_t split_end = std::min(b.end, even_);
  if (b.begin < split_end)
    pending.push_back(group_->start_reduce_scatter_chunks(
        dist::backend_buffer(grads.subspan(b.begin, split_end - b.begin)), shard_counts(b.begin, split_end),
        dist::ReduceOp::Sum));
  const std::int64_t rest_begin = std::max(b.begin, even_);
  if (rest_begin < b.end)
    pending.push_back(group_->start_all_reduce(dist::backend_buffer(grads.subspan(rest_begin, b.end - rest_begin)),
                                               dist::ReduceOp::Sum));
}

void OverlappedDataParallel::gradients_done_from(std::int64_t begin) {
  if (!armed_) return;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (started_[i] || buckets_[i].finalized_later || buckets_[i].begin < begin) continue;
    // The tail: the last bucket, the backward over or nearly so (the buckets run from the
    // buffer's end to its start, the order the backward finishes them).
    const dist::StartedAlone alone(*group_, i + 1 == buckets_.size());
    start_reduction(i);
  }
}

void OverlappedDataParallel::start_remaining() {
  // After the backward: alone.
  const dist::StartedAlone alone(*group_, true);
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (!started_[i]) start_reduction(i);
}

void OverlappedDataParallel::finish_gradient_reduction() {
  start_remaining();
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    for (dist::PendingCollective& p : reductions_[i]) p.wait();
    reductions_[i].clear();
    if (bf16_) bf16_->take_back(buckets_[i].begin, buckets_[i].end);
  }
  std::fill(started_.begin(), started_.end(), false);
  armed_ = false;
}

std::vector<Fp8ParamGather*> OverlappedDataParallel::fp8_gathers() const {
  std::vector<Fp8ParamGather*> gathers;
  for (Fp8ParamGather* g : {fp8_gather_, fp8_expert_gather_})
    if (g != nullptr) gathers.push_back(g);
  return gathers;
}

void OverlappedDataParallel::start_param_gather() {
  if (!distributed_ || group_->size() == 1) return;
  wait_param_gathers();
  // The step wrote this rank's shard of the compute copy beside its weights; the gathers bring
  // the others', so the copy needs no conversion (taken mutable without marking it stale).
  const FloatView params = gathers_compute_copy_ ? params_->compute_copy() : params_->params();
  // --fp8-param-gather: every rank casts its part of the FP8 weights first (under current
  // scaling after the amaxes' all-reduce); each bucket then gathers its FP8 weights' codes beside
  // its other elements, and the forward derives a weight's transposed copy once it waited for the
  // bucket (before_parameter_use), as Megatron's bucket groups gather their fp8 parameters and
  // post-process them in finish_param_sync.
  for (Fp8ParamGather* g : fp8_gathers()) g->cast_shard();
  // The buffer's start first: the next forward reads the embedding before the layers.
  for (std::size_t i = buckets_.size(); i-- > 0;) {
    const GradientBucket& b = buckets_[i];
    if (fp8_gather_) {
      fp8_gather_->start_code_gathers(b.begin, b.end, gathers_[i]);
      fp8_gather_->start_other_gathers(params, b.begin, b.end, gathers_[i]);
      continue;
    }
    const std::int64_t split_end = std::min(b.end, even_);
    if (b.begin < split_end)
      gathers_[i].push_back(group_->start_all_gather_chunks(
          dist::backend_buffer(params.subspan(b.begin, split_end - b.begin)), shard_counts(b.begin, split_end)));
    // The remainder belongs to the last rank (all_gather_shards broadcasts it from there).
    const std::int64_t rest_begin = std::max(b.begin, even_);
    if (rest_begin < b.end) {
      std::vector<std::int64_t> counts(static_cast<std::size_t>(group_->size()), 0);
      counts.back() = b.end - rest_begin;
      gathers_[i].push_back(
          group_->start_all_gather_chunks(dist::backend_buffer(params.subspan(rest_begin, b.end - rest_begin)), counts));
    }
  }
  if (fp8_expert_gather_) {
    fp8_expert_gather_->start_code_gathers(experts_.begin, experts_.end, expert_gathers_);
    fp8_expert_gather_->start_other_gathers(params, experts_.begin, experts_.end, expert_gathers_);
  } else if (experts_.group) {
    // The experts' region over its own group: each rank's shard as data_parallel_shard lays it
    // out (the remainder with the last rank's), in one gather.
    dist::Communicator& g = *experts_.group;
    const std::int64_t size = experts_.end - experts_.begin;
    std::vector<std::int64_t> counts(static_cast<std::size_t>(g.size()));
    for (int r = 0; r < g.size(); ++r) counts[static_cast<std::size_t>(r)] = data_parallel_shard(size, g.size(), r).size();
    expert_gathers_.push_back(
        g.start_all_gather_chunks(dist::backend_buffer(params.subspan(experts_.begin, size)), counts));
  }
  if (gathers_compute_copy_) {
    params_->mark_compute_copy_fresh();
    params_behind_ = true;
  }
}

void OverlappedDataParallel::wait_param_gathers() {
  for (std::vector<dist::PendingCollective>& pending : gathers_) {
    for (dist::PendingCollective& p : pending) p.wait();
    pending.clear();
  }
  for (dist::PendingCollective& p : expert_gathers_) p.wait();
  expert_gathers_.clear();
  for (Fp8ParamGather* g : fp8_gathers()) g->codes_arrived(0, std::numeric_limits<std::int64_t>::max());
}

void OverlappedDataParallel::finish_param_gather() {
  wait_param_gathers();
  const std::vector<Fp8ParamGather*> fp8 = fp8_gathers();
  const bool fp8_behind = std::ranges::any_of(fp8, [](const Fp8ParamGather* g) { return g->behind(); });
  if (!params_behind_ && !fp8_behind) return;
  // The fp32 weights as the non-overlapped step leaves them (this marks the compute copy stale:
  // the next forward converts it again, to the same values), each region over its group.
  const FloatView params = params_->params();
  const std::int64_t dense_end = experts_.group ? experts_.begin : params.size();
  all_gather_shards(*group_, params.first(dense_end));
  if (experts_.group) all_gather_shards(*experts_.group, params.subspan(dense_end, experts_.end - dense_end));
  params_behind_ = false;
  for (Fp8ParamGather* g : fp8) g->caught_up();
}

void OverlappedDataParallel::before_parameter_use(std::int64_t begin, std::int64_t end) {
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (gathers_[i].empty() || buckets_[i].end <= begin || buckets_[i].begin >= end) continue;
    for (dist::PendingCollective& p : gathers_[i]) p.wait();
    gathers_[i].clear();
  }
  // Every bucket holding part of a weight within [begin, end) has been waited for, now or by an
  // earlier block: its codes are whole.
  if (fp8_gather_) fp8_gather_->codes_arrived(begin, end);
  if (!expert_gathers_.empty() && experts_.begin < end && experts_.end > begin) {
    for (dist::PendingCollective& p : expert_gathers_) p.wait();
    expert_gathers_.clear();
  }
  if (fp8_expert_gather_ && expert_gathers_.empty()) fp8_expert_gather_->codes_arrived(begin, end);
}

}  // namespace mgt
