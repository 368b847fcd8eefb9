#include "kernels/staged_uploads.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace mgt {
namespace {

// Appends `values` to `staging` after `used` elements (at most `limit` in the round) and queues
// their copy to `device`.
template <typename T>
void stage(Backend& backend, PinnedHostArray<T>& staging, int64_t& used, int64_t limit, std::span<const T> values,
           DeviceSpan<T> device) {
  const auto n = static_cast<int64_t>(values.size());
  if (used + n > limit)
    throw Error("StagedUploads: " + std::to_string(used + n) + " values staged in a round begun for " +
                std::to_string(limit));
  const std::span<T> slot = staging.host().subspan(static_cast<size_t>(used), values.size());
  std::copy(values.begin(), values.end(), slot.begin());
  backend.copy_from_host_async<T>(slot, device);
  used += n;
}

}  // namespace

void StagedUploads::begin(int64_t ids, int64_t floats) {
  if (copied_) copied_->wait();
  if (ids_.size() < ids) ids_ = PinnedHostArray<int64_t>(*backend_, ids);
  if (floats_.size() < floats) floats_ = PinnedHostArray<float>(*backend_, floats);
  ids_limit_ = ids;
  floats_limit_ = floats;
  ids_used_ = 0;
  floats_used_ = 0;
}

void StagedUploads::put(std::span<const int64_t> values, DeviceSpan<int64_t> device) {
  stage(*backend_, ids_, ids_used_, ids_limit_, values, device);
}

void StagedUploads::put(std::span<const float> values, DeviceSpan<float> device) {
  stage(*backend_, floats_, floats_used_, floats_limit_, values, device);
}

}  // namespace mgt
