#include "train/fp8_param_gather.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mgt {

namespace {

std::int64_t overlap_size(std::int64_t begin, std::int64_t end, const BufferShard& s) {
  return std::max<std::int64_t>(0, std::min(end, s.end) - std::max(begin, s.begin));
}

}  // namespace

Fp8ParamGather::Fp8ParamGather(GptParameters& params, Fp8Training& fp8, dist::Communicator& group,
                               BufferShard region)
    : params_(&params),
      fp8_(&fp8),
      group_(&group),
      region_(region),
      gathers_compute_copy_(!params.compute_copy().empty() && !params.forward_reads_params()) {
  for (int r = 0; r < group.size(); ++r) {
    const BufferShard s = data_parallel_shard(region.size(), group.size(), r);
    shards_.push_back({region.begin + s.begin, region.begin + s.end});
  }
  for (std::int64_t k = 0; k < fp8.linears(); ++k) {
    const ParameterEntry& e = params.entry(fp8.linear_name(k) + ".weight");
    const Fp8Training::WeightCopy& w = fp8.weight_copy(k);
    if (e.numel() != w.out * w.in)
      throw Error("internal error: FP8 weight '" + e.name + "' has another shape than its layer's");
    if (e.offset >= region.begin && e.offset + e.numel() <= region.end) weights_.push_back({k, e.offset, e.numel(), 0});
  }
  std::sort(weights_.begin(), weights_.end(), [](const Weight& a, const Weight& b) { return a.offset < b.offset; });
  std::int64_t codes = 0;
  std::int64_t run_begin = region.begin;
  for (Weight& w : weights_) {
    w.code_offset = codes;
    codes += w.numel;
    if (run_begin < w.offset) others_.push_back({run_begin, w.offset});
    run_begin = w.offset + w.numel;
  }
  if (run_begin < region.end) others_.push_back({run_begin, region.end});
  codes_ = DeviceArray<uint8_t>(params.backend(), codes);
  for (const BufferShard& s : shards_) {
    std::int64_t count = 0;
    for (const Weight& w : weights_) count += overlap_size(w.offset, w.offset + w.numel, s);
    code_counts_.push_back(count);
  }
  // The layers' copies read the gathered codes in place: no second copy of them.
  for (const Weight& w : weights_) {
    Fp8Training::WeightCopy& copy = fp8.weight_copy(w.linear);
    copy.own_rows = {};
    copy.rows = codes_.view().subspan(w.code_offset, w.numel);
    copy.made = false;
  }
}

std::vector<std::int64_t> Fp8ParamGather::shard_counts(std::int64_t begin, std::int64_t end) const {
  std::vector<std::int64_t> counts;
  for (const BufferShard& s : shards_) counts.push_back(overlap_size(begin, end, s));
  return counts;
}

void Fp8ParamGather::gather_fp8_weights() {
  if (weights_.empty()) return;  // every layer of the region kept in bf16
  Backend& backend = params_->backend();
  const Fp8Format format = fp8_->recipe().forward_format;
  const BufferShard mine = shards_.at(static_cast<std::size_t>(group_->rank()));
  // Read-only: the weights are not written, so nothing derived from them goes stale.
  const ConstFloatView weights = static_cast<const GptParameters&>(*params_).params();
  for (const Weight& w : weights_) {
    const std::int64_t begin = std::max(w.offset, mine.begin);
    const std::int64_t end = std::min(w.offset + w.numel, mine.end);
    if (begin >= end) continue;
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    backend.fp8_quantize(weights.subspan(begin, end - begin), 1, end - begin, fp8_->weight_part_scaling(w.linear),
                         {codes_.view().subspan(w.code_offset + begin - w.offset, end - begin), format,
                          copy.scale_inv.view().subspan(0, 1)},
                         {});
  }
  group_->start_all_gather_chunks(dist::backend_buffer(codes_.view()), code_counts_).wait();
  // The other shards' fp32 values were not gathered: the copies must not be cast from them.
  behind_ = group_->size() > 1;
  for (const Weight& w : weights_) {
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    backend.fp8_transpose({copy.rows, format, copy.scale_inv.view().subspan(0, 1)}, copy.out, copy.in,
                          fp8_->weight_part_scaling(w.linear).scale,
                          {copy.columns.view(), format, copy.scale_inv.view().subspan(4, 1)});
    copy.made = true;
    copy.recorded = true;
    copy.pinned = behind_;
    copy.version = params_->params_version();
  }
}

void Fp8ParamGather::start_other_gathers(FloatView values, std::int64_t begin, std::int64_t end,
                                         std::vector<dist::PendingCollective>& pending) {
  for (const BufferShard& o : others_) {
    const std::int64_t lo = std::max(o.begin, begin);
    const std::int64_t hi = std::min(o.end, end);
    if (lo >= hi) continue;
    pending.push_back(
        group_->start_all_gather_chunks(dist::backend_buffer(values.subspan(lo, hi - lo)), shard_counts(lo, hi)));
  }
}

void Fp8ParamGather::gather() {
  gather_fp8_weights();
  // The step wrote this rank's shard of the compute copy beside its weights; the gathers bring
  // the others' (taken mutable without marking it stale).
  const FloatView values = gathers_compute_copy_ ? params_->compute_copy() : params_->params();
  std::vector<dist::PendingCollective> pending;
  start_other_gathers(values, region_.begin, region_.end, pending);
  for (dist::PendingCollective& p : pending) p.wait();
  if (gathers_compute_copy_ && group_->size() > 1) {
    params_->mark_compute_copy_fresh();
    behind_ = true;
  }
}

void Fp8ParamGather::catch_up() {
  if (!behind_) return;
  // (This marks the compute copy stale: the next forward converts it again, to the same values.)
  all_gather_shards(*group_, params_->params().subspan(region_.begin, region_.size()));
  caught_up();
}

void Fp8ParamGather::caught_up() {
  for (const Weight& w : weights_) {
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    if (!copy.pinned) continue;
    copy.pinned = false;
    copy.version = params_->params_version();
  }
  behind_ = false;
}

}  // namespace mgt
