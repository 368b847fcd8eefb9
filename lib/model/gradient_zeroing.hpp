// The gradients' zeroing at the start of an iteration, left to the first write where the writer
// can write over the gradient instead of adding to it: the weight-gradient GEMM then runs with
// β = 0 (it does not read the old gradient) and the fill of the whole gradient buffer (about a
// millisecond per step at 1.3B parameters on an H200) is gone. Megatron zeroes its gradient
// buffers (zero_grad_buffer) before every iteration; the values are the same.
//
// An entry whose writers all ask accumulates() before each write is registered with defer(). After
// begin_iteration() it is logically zero: its first write is told to write over it, later ones
// to add. Entries not registered are filled at begin_iteration() as before. An entry no write
// reached is filled by settle() (or settle_range()), which the model calls before anything reads
// the gradients: the end of its backward, and a block's end where the data-parallel reduction
// starts from it.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

class GradientZeroing {
public:
  explicit GradientZeroing(std::span<const ParameterEntry> entries);

  // e (an entry of the table given) is written only by writers that ask accumulates() first.
  void defer(const ParameterEntry& e);

  // A new iteration: the entries not deferred are filled with zeros in `grads` (runs of adjacent
  // ones in one fill each; the entries are in buffer order), the deferred ones become unwritten.
  void begin_iteration(Backend& backend, FloatView grads);
  // Whether the next write of e's gradient adds to it: false once per iteration for a deferred
  // entry (its first write, which then writes over it), true otherwise.
  bool accumulates(const ParameterEntry& e);
  // The deferred entries not yet written this iteration (all, or those starting in
  // [begin, end)) filled with zeros, and counted as written.
  void settle(Backend& backend, FloatView grads) { settle_range(backend, grads, 0, INT64_MAX); }
  void settle_range(Backend& backend, FloatView grads, int64_t begin, int64_t end);

private:
  enum class State : std::uint8_t { kFilled, kDeferred, kUnwritten };
  std::size_t index_of(const ParameterEntry& e) const;

  std::span<const ParameterEntry> entries_;
  std::vector<State> states_;
  int64_t unwritten_ = 0;  // entries in kUnwritten
  // The ranges begin_iteration fills, made again after a defer().
  std::vector<std::pair<int64_t, int64_t>> fill_ranges_;
  bool ranges_stale_ = true;
};

}  // namespace mgt
