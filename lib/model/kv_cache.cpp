#include "model/kv_cache.hpp"

#include <atomic>
#include <exception>
#include <string>

#include "core/error.hpp"

namespace mgt {

KvCache::KvCache(Backend& backend, const GptConfig& config, int64_t batch, int64_t capacity,
                 const TensorParallelRank& tp)
    : backend_(&backend), batch_(batch), capacity_(capacity) {
  static std::atomic<uint64_t> caches_made{0};
  id_ = ++caches_made;
  if (batch < 1 || capacity < 1) throw Error("KvCache: batch and capacity must be positive");
  length_on_device_ = DeviceIndexBuffer(backend, 1);
  length_staging_ = PinnedHostArray<int64_t>(backend, 1);
  const GptConfig c = config.resolved();
  position_elements_ = batch * (c.query_groups() / tp.size) * c.kv_channels;
  owned_.reserve(static_cast<size_t>(2 * c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerKvCache layer;
    owned_.emplace_back(backend, capacity * position_elements_, backend.activation_type());
    layer.key = owned_.back().view();
    owned_.emplace_back(backend, capacity * position_elements_, backend.activation_type());
    layer.value = owned_.back().view();
    layer.capacity = capacity;
    layer.length = length_on_device_.view();
    layers_.push_back(layer);
  }
  set_length(0);
}

KvCache::~KvCache() {
  // The staging memory goes with the cache: no copy may still be reading it.
  try {
    if (length_copied_) length_copied_->wait();
  } catch (const std::exception&) {  // a device fault, already reported by whatever ran last
  }
}

void KvCache::set_length(int64_t length) {
  length_ = length;
  if (length_copied_) length_copied_->wait();
  length_staging_.host()[0] = length;
  backend_->copy_from_host_async<int64_t>(length_staging_.host(), length_on_device_.view());
  length_copied_ = backend_->record_event();
}

void KvCache::advance(int64_t n) {
  if (n < 0 || length_ + n > capacity_)
    throw Error("KvCache: " + std::to_string(length_) + " + " + std::to_string(n) +
                " positions exceed the capacity of " + std::to_string(capacity_));
  set_length(length_ + n);
}

}  // namespace mgt
