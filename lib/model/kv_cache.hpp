// The keys and values of every layer for the tokens a generation has already processed, so that
// each new token costs one token's forward plus attention over the cache instead of a forward
// over the whole sequence. Sequence-major like the activations, [capacity, batch, groups,
// head_dim] per layer: the first `length` positions of every sequence of the batch are filled,
// and the keys of positions [0, n) are one contiguous [n, batch, groups, head_dim] block, which
// is what the attention kernel reads. The length is also kept in backend memory, where a
// recorded decode step reads it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

struct LayerKvCache {
  FloatView key;    // [capacity, batch, groups, head_dim], keys after RoPE
  FloatView value;  // same shape
  int64_t capacity = 0;
  ConstIndexView length;  // [1]: the cache's length, in backend memory
};

class KvCache {
public:
  KvCache(Backend& backend, const GptConfig& config, int64_t batch, int64_t capacity,
          const TensorParallelRank& tp = {});
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  ~KvCache();

  // Distinguishes this cache from every other made in the process (a recorded decode step
  // belongs to one cache's buffers).
  uint64_t id() const { return id_; }
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  // Positions filled in every sequence.
  int64_t length() const { return length_; }
  // Elements of one position (batch · groups · head_dim).
  int64_t position_elements() const { return position_elements_; }
  const LayerKvCache& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }

  // Called by the model after it appended n positions; throws past the capacity.
  void advance(int64_t n);
  // Forgets every position (the buffers are reused).
  void clear() { set_length(0); }

private:
  void set_length(int64_t length);

  Backend* backend_;
  uint64_t id_;
  int64_t batch_;
  int64_t capacity_;
  int64_t length_ = 0;
  int64_t position_elements_;
  std::vector<DeviceBuffer> owned_;
  DeviceIndexBuffer length_on_device_;
  // The length as the asynchronous copy to the device reads it, and the event after that copy:
  // the staging is rewritten only once the queue has passed it.
  PinnedHostArray<int64_t> length_staging_;
  std::unique_ptr<QueueEvent> length_copied_;
  std::vector<LayerKvCache> layers_;
};

}  // namespace mgt
