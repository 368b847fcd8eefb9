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
  if (fp8.recipe().current_scaling && !weights_.empty()) {
    const auto n = static_cast<std::int64_t>(weights_.size());
    current_meta_ = DeviceBuffer(params.backend(), n + 2);
    params.backend().fill(current_meta_.view().subspan(n, 1), 1.0f);
    scratch_code_ = DeviceArray<uint8_t>(params.backend(), 1);
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

std::int64_t Fp8ParamGather::code_position(std::int64_t position) const {
  std::int64_t codes = 0;
  for (const Weight& w : weights_) {
    if (w.offset >= position) break;
    codes += std::min(w.numel, position - w.offset);
  }
  return codes;
}

void Fp8ParamGather::reduce_current_scales() {
  Backend& backend = params_->backend();
  const Fp8Format format = fp8_->recipe().forward_format;
  const BufferShard mine = shards_.at(static_cast<std::size_t>(group_->rank()));
  const ConstFloatView weights = static_cast<const GptParameters&>(*params_).params();
  const auto n = static_cast<std::int64_t>(weights_.size());
  const FloatView amaxes = current_meta_.view().first(n);
  const FloatView unit_scale = current_meta_.view().subspan(n, 1);
  const FloatView scratch_factor = current_meta_.view().subspan(n + 1, 1);
  // Step 1 of _cast_master_weights_to_fp8_current_scaling: the amax of this rank's part of each
  // weight, 0 where it holds none (tex.compute_amax). Taken by a cast that records max |x| (its
  // codes, written where this rank's codes go, are cast again below).
  backend.fill(amaxes, 0.0f);
  for (std::size_t i = 0; i < weights_.size(); ++i) {
    const Weight& w = weights_[i];
    const std::int64_t begin = std::max(w.offset, mine.begin);
    const std::int64_t end = std::min(w.offset + w.numel, mine.end);
    if (begin >= end) continue;
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    backend.fp8_quantize(weights.subspan(begin, end - begin), 1, end - begin,
                         {unit_scale, amaxes.subspan(static_cast<std::int64_t>(i), 1), false},
                         {codes_.view().subspan(w.code_offset + begin - w.offset, end - begin), format,
                          copy.scale_inv.view().subspan(0, 1)},
                         {});
  }
  // Step 2: one max all-reduce of the packed amaxes over the distributed optimizer's group.
  group_->all_reduce(amaxes, dist::ReduceOp::Max);
  // Step 3: each scale from its whole weight's amax, as a current-scaling cast of the whole
  // weight derives it (TE's multi_tensor_compute_scale_and_scale_inv, compute_scale_from_amax
  // without epsilon or power-of-two rounding, as Float8CurrentScaling's weights leave them):
  // that cast itself, of a one-element tensor holding the amax, so that the scale is the same to
  // the bit, the edge cases included (an amax of 0 or infinite, a quotient beyond fp32's range).
  // It leaves the scale and the amax where the layer's own cast of the whole weight would
  // (Fp8Training::weight_scaling).
  for (std::size_t i = 0; i < weights_.size(); ++i) {
    backend.fp8_quantize(amaxes.subspan(static_cast<std::int64_t>(i), 1), 1, 1,
                         fp8_->weight_scaling(weights_[i].linear),
                         {scratch_code_.view(), format, scratch_factor}, {});
  }
}

void Fp8ParamGather::cast_shard() {
  if (weights_.empty()) return;  // every layer of the region kept in bf16
  Backend& backend = params_->backend();
  const bool current = fp8_->recipe().current_scaling;
  if (current) reduce_current_scales();
  const Fp8Format format = fp8_->recipe().forward_format;
  const BufferShard mine = shards_.at(static_cast<std::size_t>(group_->rank()));
  // Read-only: the weights are not written, so nothing derived from them goes stale.
  const ConstFloatView weights = static_cast<const GptParameters&>(*params_).params();
  // The other shards' fp32 values are not gathered: the copies must not be cast from them.
  behind_ = group_->size() > 1;
  for (Weight& w : weights_) {
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    const std::int64_t begin = std::max(w.offset, mine.begin);
    const std::int64_t end = std::min(w.offset + w.numel, mine.end);
    if (begin < end) {
      // Step 4 of TE's casts: this rank's part, with the whole weight's scale (current scaling:
      // the one just derived, read as a given scale, as TE's Float8Quantizer(scale=...) does).
      const Fp8Scaling scaling =
          current ? Fp8Scaling{fp8_->weight_scaling(w.linear).scale, {}, false} : fp8_->weight_part_scaling(w.linear);
      backend.fp8_quantize(weights.subspan(begin, end - begin), 1, end - begin, scaling,
                           {codes_.view().subspan(w.code_offset + begin - w.offset, end - begin), format,
                            copy.scale_inv.view().subspan(0, 1)},
                           {});
    }
    copy.made = true;
    copy.recorded = true;
    copy.pinned = behind_;
    copy.version = params_->params_version();
    if (!w.in_flight) ++in_flight_;
    w.in_flight = true;
  }
}

void Fp8ParamGather::start_code_gathers(std::int64_t begin, std::int64_t end,
                                        std::vector<dist::PendingCollective>& pending) {
  begin = std::max(begin, region_.begin);
  end = std::min(end, region_.end);
  if (begin >= end) return;
  const std::int64_t first = code_position(begin);
  const std::int64_t last = code_position(end);
  if (first >= last) return;
  // Each rank's codes in the range lie together, in rank order, as its shard does in the buffer.
  std::vector<std::int64_t> counts;
  for (const BufferShard& s : shards_) {
    const std::int64_t lo = std::max(begin, s.begin);
    const std::int64_t hi = std::min(end, s.end);
    counts.push_back(lo < hi ? code_position(hi) - code_position(lo) : 0);
  }
  pending.push_back(
      group_->start_all_gather_chunks(dist::backend_buffer(codes_.view().subspan(first, last - first)), counts));
}

void Fp8ParamGather::codes_arrived(std::int64_t begin, std::int64_t end) {
  if (in_flight_ == 0) return;
  Backend& backend = params_->backend();
  const Fp8Format format = fp8_->recipe().forward_format;
  for (Weight& w : weights_) {
    if (!w.in_flight || w.offset < begin || w.offset + w.numel > end) continue;
    // TE's post_all_gather_processing: the transposed copy the backward's GEMMs read, and the
    // factors of both from the scale every rank cast with.
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    backend.fp8_transpose({copy.rows, format, copy.scale_inv.view().subspan(0, 1)}, copy.out, copy.in,
                          fp8_->weight_part_scaling(w.linear).scale,
                          {copy.columns.view(), format, copy.scale_inv.view().subspan(4, 1)});
    w.in_flight = false;
    --in_flight_;
  }
}

void Fp8ParamGather::gather_fp8_weights() {
  if (weights_.empty()) return;
  cast_shard();
  std::vector<dist::PendingCollective> pending;
  start_code_gathers(region_.begin, region_.end, pending);
  for (dist::PendingCollective& p : pending) p.wait();
  codes_arrived(region_.begin, region_.end);
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

void Fp8ParamGather::cast_whole_weights() {
  Backend& backend = params_->backend();
  const Fp8Format format = fp8_->recipe().forward_format;
  const ConstFloatView weights = static_cast<const GptParameters&>(*params_).params();
  for (Weight& w : weights_) {
    Fp8Training::WeightCopy& copy = fp8_->weight_copy(w.linear);
    // Delayed scaling: the weight's scale, its amax recorded as the parts' casts record it;
    // current scaling: the whole weight's own amax and scale.
    const Fp8Scaling scaling =
        fp8_->recipe().current_scaling ? fp8_->weight_scaling(w.linear) : fp8_->weight_part_scaling(w.linear);
    backend.fp8_quantize(weights.subspan(w.offset, w.numel), copy.out, copy.in, scaling,
                         {copy.rows, format, copy.scale_inv.view().subspan(0, 1)},
                         {copy.columns.view(), format, copy.scale_inv.view().subspan(4, 1)});
    copy.made = true;
    copy.recorded = true;
    copy.pinned = false;
    copy.version = params_->params_version();
    if (w.in_flight) --in_flight_;
    w.in_flight = false;
  }
  behind_ = false;
}

void Fp8ParamGather::catch_up() { catch_up({this}); }

void Fp8ParamGather::catch_up(std::initializer_list<Fp8ParamGather*> gathers) {
  std::vector<Fp8ParamGather*> behind;
  for (Fp8ParamGather* g : gathers) {
    if (g == nullptr || !g->behind_) continue;
    // (This marks the compute copy stale: the next forward converts it again, to the same values.)
    all_gather_shards(*g->group_, g->params_->params().subspan(g->region_.begin, g->region_.size()));
    behind.push_back(g);
  }
  for (Fp8ParamGather* g : behind) g->caught_up();
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
