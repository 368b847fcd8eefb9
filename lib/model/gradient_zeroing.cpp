#include "model/gradient_zeroing.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {

GradientZeroing::GradientZeroing(std::span<const ParameterEntry> entries)
    : entries_(entries), states_(entries.size(), State::kFilled) {}

std::size_t GradientZeroing::index_of(const ParameterEntry& e) const {
  const std::ptrdiff_t i = &e - entries_.data();
  if (i < 0 || i >= static_cast<std::ptrdiff_t>(entries_.size()))
    throw Error("GradientZeroing: " + e.name + " is not an entry of this parameter table");
  return static_cast<std::size_t>(i);
}

void GradientZeroing::defer(const ParameterEntry& e) {
  State& s = states_[index_of(e)];
  if (s != State::kFilled) return;
  s = State::kDeferred;
  ranges_stale_ = true;
}

void GradientZeroing::begin_iteration(Backend& backend, FloatView grads) {
  if (ranges_stale_) {
    // A run of filled entries (with the alignment gaps between them, which stay zero) is one
    // range. Gaps next to deferred entries are left alone: nothing writes them, so they keep the
    // zeros of the buffer's allocation.
    fill_ranges_.clear();
    bool open = false;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const ParameterEntry& e = entries_[i];
      if (states_[i] != State::kFilled) {
        open = false;
        continue;
      }
      if (e.numel() == 0) continue;
      if (open) {
        fill_ranges_.back().second = e.offset + e.numel();
      } else {
        fill_ranges_.emplace_back(e.offset, e.offset + e.numel());
        open = true;
      }
    }
    ranges_stale_ = false;
  }
  for (const auto& [begin, end] : fill_ranges_) backend.fill(grads.subspan(begin, end - begin), 0.0f);
  unwritten_ = 0;
  for (State& s : states_) {
    if (s == State::kFilled) continue;
    s = State::kUnwritten;
    ++unwritten_;
  }
}

bool GradientZeroing::accumulates(const ParameterEntry& e) {
  State& s = states_[index_of(e)];
  if (s != State::kUnwritten) return true;
  s = State::kDeferred;
  --unwritten_;
  return false;
}

void GradientZeroing::settle_range(Backend& backend, FloatView grads, int64_t begin, int64_t end) {
  if (unwritten_ == 0) return;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const ParameterEntry& e = entries_[i];
    if (states_[i] != State::kUnwritten || e.offset < begin || e.offset >= end) continue;
    backend.fill(grads.subspan(e.offset, e.numel()), 0.0f);
    states_[i] = State::kDeferred;
    --unwritten_;
  }
}

}  // namespace mgt
