// --rampup-batch-size START INCREMENT SAMPLES: Megatron's batch-size ramp-up
// (megatron/core/num_microbatches_calculator.py RampupBatchsizeNumMicroBatchesCalculator). The
// global batch size starts at START and grows by INCREMENT every SAMPLES / ((GBS − START) /
// INCREMENT) consumed samples, reaching --global-batch-size after SAMPLES; the number of
// micro-batches per iteration follows it. The sampler's order does not change: each iteration
// takes the next global-batch-size samples. It lives beside the dataset sizing because the
// number of iterations of a --train-samples run, and so the validation set's size, depend on it
// (megatron/training/training.py update_train_iters).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt {

struct BatchSizeRampup {
  std::int64_t start = 0;      // START: the first global batch size
  std::int64_t increment = 0;  // INCREMENT
  std::int64_t samples = 0;    // SAMPLES: consumed samples over which the batch size ramps up
};

// The flag's values (argparse nargs='*', each int()): exactly three integers, or a UsageError
// naming the flag.
BatchSizeRampup parse_rampup_batch_size(const std::vector<std::string>& values);

class GlobalBatchSizeSchedule {
public:
  // Throws mgt::UsageError naming --rampup-batch-size where Megatron's calculator asserts (and
  // where it would divide by zero: START equal to the global batch size, SAMPLES 0).
  GlobalBatchSizeSchedule(std::int64_t global_batch_size, std::optional<BatchSizeRampup> rampup);

  // The global batch size of the iteration that starts after `consumed_samples` (Megatron's
  // update(consumed_samples) then get_current_global_batch_size()).
  std::int64_t global_batch_size(std::int64_t consumed_samples) const;
  std::int64_t final_global_batch_size() const { return global_batch_size_; }
  bool ramps() const { return rampup_.has_value(); }

  // Megatron's update_train_iters for a --train-samples run: the iterations of the ramp-up
  // (the last may pass train_samples), then whole batches of the final size.
  std::int64_t train_iters(std::int64_t train_samples) const;

  // The distinct global batch sizes a run of `train_iters` iterations uses, in order.
  std::vector<std::int64_t> batch_sizes_used(std::int64_t train_iters) const;

private:
  std::int64_t global_batch_size_;
  std::optional<BatchSizeRampup> rampup_;
  double samples_per_increment_ = 0.0;
};

}  // namespace mgt
