// Host-to-device uploads through page-locked staging, queued among the operations without the
// host waiting for the device: a round of uploads (a micro-batch's ids and mask, a decode step's
// tokens and positions) begins by waiting until the previous round's copies have been passed, so
// that the staging they read is never rewritten under them.
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "kernels/backend.hpp"

namespace mgt {

class StagedUploads {
public:
  explicit StagedUploads(Backend& backend) : backend_(&backend) {}

  // Starts a round of at most `ids` int64 and `floats` fp32 values: waits for the previous
  // round's copies, grows the staging if needed.
  void begin(int64_t ids, int64_t floats);
  // Copies `values` into the staging and queues their copy to `device` (of the same size).
  void put(std::span<const int64_t> values, DeviceSpan<int64_t> device);
  void put(std::span<const float> values, DeviceSpan<float> device);
  // Ends the round: the event the next round waits for.
  void end() { copied_ = backend_->record_event(); }

private:
  Backend* backend_;
  PinnedHostArray<int64_t> ids_;
  PinnedHostArray<float> floats_;
  int64_t ids_limit_ = 0;  // the round's sizes, as begun
  int64_t floats_limit_ = 0;
  int64_t ids_used_ = 0;
  int64_t floats_used_ = 0;
  std::unique_ptr<QueueEvent> copied_;
};

}  // namespace mgt
