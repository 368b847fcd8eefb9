// --check-for-spiky-loss: Megatron's check of every micro-batch's loss (pretrain_gpt.py loss_func,
// core_v0.13.0), which validates the loss, Σ CE · mask of the micro-batch's tokens on this rank,
// with rerun_state_machine.is_unexpectedly_large (threshold SPIKY_LOSS_FACTOR = 10, context
// "loss", 100 samples): the first 100 values, of training and evaluation alike, set the largest
// magnitude; a later value at least 10 times it is rejected. Under Megatron's default --rerun-mode
// disabled a rejected value stops the job ("Unexpected result ... (message='Spiky loss')"), as
// here. NaN and infinity are left to the non-finite checks. The state lives as long as the
// process, as Megatron's does: a resumed run counts its 100 samples again.
#pragma once
#include <cstdint>
#include <optional>

namespace mgt {

class SpikyLossCheck {
public:
  static constexpr double kThreshold = 10.0;
  static constexpr std::int64_t kSamples = 100;

  struct Spike {
    double value = 0.0;    // the rejected loss
    double largest = 0.0;  // the largest magnitude of the first kSamples
  };

  // One micro-batch's loss. The first spike since the last take() is kept.
  void observe(double loss);
  // The spike seen since the last call, if any; cleared.
  std::optional<Spike> take();

private:
  std::int64_t samples_ = 0;
  double largest_ = 0.0;
  std::optional<Spike> spike_;
};

}  // namespace mgt
