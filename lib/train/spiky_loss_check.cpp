#include "train/spiky_loss_check.hpp"

#include <algorithm>
#include <cmath>

namespace mgt {

void SpikyLossCheck::observe(double loss) {
  const double value = std::fabs(loss);
  if (!std::isfinite(value)) return;
  if (samples_ < kSamples) {
    ++samples_;
    largest_ = std::max(largest_, value);
    return;
  }
  if (value >= largest_ * kThreshold && !spike_) spike_ = Spike{loss, largest_};
}

std::optional<SpikyLossCheck::Spike> SpikyLossCheck::take() {
  std::optional<Spike> s = spike_;
  spike_.reset();
  return s;
}

}  // namespace mgt
