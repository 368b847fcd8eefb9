#include "model/fp8_training.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace mgt {
namespace {

constexpr int64_t kScratchKinds = 4;
constexpr int64_t kScratchFields = 3;  // scale_inv, scale, amax
// cuBLASLt reads an FP8 GEMM's scale_inv factors through pointers that must be 16-byte aligned:
// every part of the state, and every field of the scratch, starts at a multiple of 4 floats.
constexpr int64_t kAlignFloats = 4;
int64_t aligned(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace

Fp8Training::Fp8Training(const Fp8Recipe& recipe, Backend& backend, int64_t linears, int64_t expert_linears)
    : recipe_(recipe),
      backend_(&backend),
      linears_(linears + expert_linears),
      dense_linears_(linears),
      names_(static_cast<size_t>(linears + expert_linears)),
      weights_(static_cast<size_t>(linears + expert_linears)),
      lanes_(std::max<int64_t>(1, backend.side_by_side_lanes())),
      scratch_(static_cast<size_t>(lanes_ * kScratchKinds)) {
  if (recipe.amax_history_len < 1) throw Error("FP8: the amax history needs at least one entry");
  const int64_t len = recipe.amax_history_len;
  const int64_t forward = 2 * linears_;
  const int64_t sizes[] = {len * forward, forward, len * linears_, linears_,
                           lanes_ * kScratchKinds * kScratchFields * kAlignFloats};
  int64_t total = 0;
  for (const int64_t n : sizes) total += aligned(n);
  meta_ = DeviceBuffer(backend, total);
  FloatView* parts[] = {&forward_history_, &forward_scale_, &backward_history_, &backward_scale_, &scratch_meta_};
  int64_t offset = 0;
  for (int i = 0; i < 5; ++i) {
    *parts[i] = meta_.view().subspan(offset, sizes[i]);
    offset += aligned(sizes[i]);
  }
  // Transformer Engine's initial state: scales 1, histories empty.
  backend.fill(meta_.view(), 0.0f);
  backend.fill(forward_scale_, 1.0f);
  backend.fill(backward_scale_, 1.0f);
  bound_forward_scale_ = forward_scale_;
}

int64_t Fp8Training::add_linear(std::string name, int64_t out, int64_t in, bool expert) {
  const int64_t k = expert ? dense_linears_ + added_experts_ : added_dense_;
  if (k >= (expert ? linears_ : dense_linears_))
    throw Error(std::string("FP8: more ") + (expert ? "experts' " : "") + "linear layers than the state was made for");
  (expert ? added_experts_ : added_dense_) += 1;
  names_[static_cast<size_t>(k)] = std::move(name);
  WeightCopy& w = weights_[static_cast<size_t>(k)];
  w.out = out;
  w.in = in;
  w.own_rows = DeviceArray<uint8_t>(*backend_, out * in);
  w.rows = w.own_rows.view();
  w.columns = DeviceArray<uint8_t>(*backend_, out * in);
  w.scale_inv = DeviceBuffer(*backend_, 8);
  return k;
}

void Fp8Training::require_complete() const {
  if (added_dense_ + added_experts_ != linears_)
    throw Error("internal error: FP8 state for " + std::to_string(linears_) + " linear layers, " +
                std::to_string(added_dense_ + added_experts_) + " added");
}

Fp8Scaling Fp8Training::weight_part_scaling(int64_t k) {
  return {forward_scale_.subspan(2 * k + 1, 1), forward_history_.subspan(2 * k + 1, 1), false};
}

namespace {

std::vector<float> to_host(Backend& backend, ConstFloatView view) {
  std::vector<float> host(static_cast<size_t>(view.size()));
  backend.copy_to_host(view, std::span<float>(host));
  return host;
}

}  // namespace

std::vector<Fp8Training::LinearState> Fp8Training::read_state() {
  require_complete();
  const int64_t len = recipe_.amax_history_len;
  const std::vector<float> fh = to_host(*backend_, forward_history_);
  const std::vector<float> fs = to_host(*backend_, forward_scale_);
  const std::vector<float> bh = to_host(*backend_, backward_history_);
  const std::vector<float> bs = to_host(*backend_, backward_scale_);
  std::vector<LinearState> state(static_cast<size_t>(linears_));
  for (int64_t k = 0; k < linears_; ++k) {
    LinearState& s = state[static_cast<size_t>(k)];
    for (int64_t row = 0; row < len; ++row) {
      s.forward_history.push_back(fh[static_cast<size_t>(row * 2 * linears_ + 2 * k)]);
      s.forward_history.push_back(fh[static_cast<size_t>(row * 2 * linears_ + 2 * k + 1)]);
      s.backward_history.push_back(bh[static_cast<size_t>(row * linears_ + k)]);
    }
    s.forward_scale = {fs[static_cast<size_t>(2 * k)], fs[static_cast<size_t>(2 * k + 1)]};
    s.backward_scale = {bs[static_cast<size_t>(k)]};
  }
  return state;
}

void Fp8Training::write_state(const std::vector<LinearState>& state) {
  require_complete();
  if (static_cast<int64_t>(state.size()) != linears_) throw Error("FP8: state for another number of linear layers");
  const int64_t len = recipe_.amax_history_len;
  std::vector<float> fh = to_host(*backend_, forward_history_);
  std::vector<float> fs = to_host(*backend_, forward_scale_);
  std::vector<float> bh = to_host(*backend_, backward_history_);
  std::vector<float> bs = to_host(*backend_, backward_scale_);
  for (int64_t k = 0; k < linears_; ++k) {
    const LinearState& s = state[static_cast<size_t>(k)];
    if (!s.forward_scale.empty()) {
      fs[static_cast<size_t>(2 * k)] = s.forward_scale.at(0);
      fs[static_cast<size_t>(2 * k + 1)] = s.forward_scale.at(1);
      bs[static_cast<size_t>(k)] = s.backward_scale.at(0);
    }
    if (static_cast<int64_t>(s.forward_history.size()) == 2 * len &&
        static_cast<int64_t>(s.backward_history.size()) == len) {
      for (int64_t row = 0; row < len; ++row) {
        fh[static_cast<size_t>(row * 2 * linears_ + 2 * k)] = s.forward_history[static_cast<size_t>(2 * row)];
        fh[static_cast<size_t>(row * 2 * linears_ + 2 * k + 1)] = s.forward_history[static_cast<size_t>(2 * row + 1)];
        bh[static_cast<size_t>(row * linears_ + k)] = s.backward_history[static_cast<size_t>(row)];
      }
    }
  }
  backend_->copy_from_host(std::span<const float>(fh), forward_history_);
  backend_->copy_from_host(std::span<const float>(fs), forward_scale_);
  backend_->copy_from_host(std::span<const float>(bh), backward_history_);
  backend_->copy_from_host(std::span<const float>(bs), backward_scale_);
}

void Fp8Training::begin_forward(int64_t slot, bool training) {
  recording_ = training;
  recording_forward_ = training;
  slot_ = slot;
  if (!training) {
    bound_forward_scale_ = forward_scale_;
    return;
  }
  DeviceBuffer& snapshot = snapshots_[slot];
  if (snapshot.size() != forward_scale_.size()) snapshot = DeviceBuffer(*backend_, forward_scale_.size());
  backend_->copy(forward_scale_, snapshot.view());
  bound_forward_scale_ = snapshot.view();
}

void Fp8Training::begin_backward(int64_t slot) {
  const auto it = snapshots_.find(slot);
  if (it == snapshots_.end()) throw Error("FP8: a backward without its training forward");
  recording_ = true;
  // A forward rerun by recomputation casts with the slot's snapshot and records no amax, as
  // Transformer Engine's recompute phase does: the forward's own amaxes are in the history
  // already, and finish_forward has moved the history on since, so that a rerun's would land in
  // the next forward's entry.
  recording_forward_ = false;
  slot_ = slot;
  bound_forward_scale_ = it->second.view();
}

void Fp8Training::finish_forward() {
  reduce_and_update(forward_history_, forward_scale_, 2, recipe_.forward_format);
}

void Fp8Training::finish_backward() {
  reduce_and_update(backward_history_, backward_scale_, 1, recipe_.backward_format);
}

void Fp8Training::reduce_and_update(FloatView history, FloatView scale, int64_t per_linear, Fp8Format format) {
  const int64_t tensors = per_linear * linears_;
  if (recipe_.current_scaling || tensors == 0) return;
  // The newest amaxes: the dense layers' first, then the routed experts'.
  const int64_t dense = per_linear * dense_linears_;
  if (!expert_reduce_) {
    if (reduce_) reduce_(history.first(tensors));
  } else {
    if (reduce_ && dense > 0) reduce_(history.first(dense));
    if (tensors > dense) expert_reduce_(history.subspan(dense, tensors - dense));
  }
  backend_->fp8_scaling_update(history, scale, tensors, recipe_.amax_history_len, recipe_.amax_compute_algo,
                               fp8_scaled_max(format, recipe_.margin));
}

FloatView Fp8Training::scratch_meta(Scratch which, int64_t field) {
  const int64_t kind = lane_ * kScratchKinds + static_cast<int64_t>(which);
  return scratch_meta_.subspan((kind * kScratchFields + field) * kAlignFloats, 1);
}

Fp8Scaling Fp8Training::input_scaling(int64_t k) {
  if (recipe_.current_scaling)
    return {scratch_meta(Scratch::kInputRows, 1), scratch_meta(Scratch::kInputRows, 2), true};
  return {bound_forward_scale_.subspan(2 * k, 1), recording_forward_ ? forward_history_.subspan(2 * k, 1) : FloatView(),
          false};
}

Fp8Scaling Fp8Training::input_rescaling(int64_t k) {
  if (recipe_.current_scaling)
    return {scratch_meta(Scratch::kInputColumns, 1), scratch_meta(Scratch::kInputColumns, 2), true};
  return {bound_forward_scale_.subspan(2 * k, 1), FloatView(), false};
}

Fp8Scaling Fp8Training::weight_scaling(int64_t k) {
  const FloatView amax = forward_history_.subspan(2 * k + 1, 1);
  if (recipe_.current_scaling) return {forward_scale_.subspan(2 * k + 1, 1), amax, true};
  return {forward_scale_.subspan(2 * k + 1, 1), recording_forward_ ? amax : FloatView(), false};
}

Fp8Scaling Fp8Training::grad_scaling(int64_t k, Scratch into) {
  if (recipe_.current_scaling) return {scratch_meta(into, 1), scratch_meta(into, 2), true};
  const bool record = recording_ && into == Scratch::kGradRows;
  return {backward_scale_.subspan(k, 1), record ? backward_history_.subspan(k, 1) : FloatView(), false};
}

Fp8View Fp8Training::scratch(Scratch which, int64_t elements, Fp8Format format) {
  DeviceArray<uint8_t>& codes = scratch_[static_cast<size_t>(lane_ * kScratchKinds + static_cast<int64_t>(which))];
  if (codes.size() < elements) codes = DeviceArray<uint8_t>(*backend_, elements);
  return {codes.view().first(elements), format, scratch_meta(which, 0)};
}

void Fp8Training::set_lane(int64_t lane) {
  if (lane < 0 || lane >= lanes_)
    throw Error("internal error: FP8 scratch lane " + std::to_string(lane) + " of " + std::to_string(lanes_));
  lane_ = lane;
}

Fp8View Fp8Training::keep_input_columns(int64_t k, int64_t elements) {
  if (!recording_ || !keep_input_columns_ || !recipe_.wgrad) return {};
  KeptColumns& kept = kept_columns_[{slot_, k}];
  if (kept.codes.size() != elements) kept.codes = DeviceArray<uint8_t>(*backend_, elements);
  if (kept.scale_inv.size() == 0) kept.scale_inv = DeviceBuffer(*backend_, kAlignFloats, FloatType::kF32);
  kept.kept = true;
  return {kept.codes.view(), recipe_.forward_format, kept.scale_inv.view().first(1)};
}

ConstFp8View Fp8Training::take_input_columns(int64_t k, int64_t elements) {
  const auto it = kept_columns_.find({slot_, k});
  if (it == kept_columns_.end() || !it->second.kept || it->second.codes.size() != elements) return {};
  it->second.kept = false;
  return {it->second.codes.view(), recipe_.forward_format, it->second.scale_inv.view().first(1)};
}

}  // namespace mgt
