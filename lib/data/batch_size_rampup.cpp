#include "data/batch_size_rampup.hpp"

#include <string>

#include "core/command_line.hpp"
#include "core/error.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

BatchSizeRampup parse_rampup_batch_size(const std::vector<std::string>& values) {
  const char* flag = "--rampup-batch-size";
  if (values.size() != 3)
    throw UsageError(std::string(flag) + " takes three values, START INCREMENT SAMPLES, not " +
                     std::to_string(values.size()));
  return {parse_integer_flag(flag, values[0]), parse_integer_flag(flag, values[1]), parse_integer_flag(flag, values[2])};
}

GlobalBatchSizeSchedule::GlobalBatchSizeSchedule(std::int64_t global_batch_size, std::optional<BatchSizeRampup> rampup)
    : global_batch_size_(global_batch_size), rampup_(rampup) {
  if (!rampup_) return;
  const BatchSizeRampup& r = *rampup_;
  const std::string flag = "--rampup-batch-size";
  if (r.start <= 0) throw UsageError(flag + ": the start batch size must be positive, not " + str(r.start));
  if (r.increment <= 0) throw UsageError(flag + ": the batch size increment must be positive, not " + str(r.increment));
  // Megatron allows 0 and then divides by zero at the first update.
  if (r.samples <= 0) throw UsageError(flag + ": the ramp-up samples must be positive, not " + str(r.samples));
  const std::int64_t difference = global_batch_size - r.start;
  if (difference < 0)
    throw UsageError(flag + ": the start batch size (" + str(r.start) + ") exceeds --global-batch-size (" +
                     str(global_batch_size) + ")");
  if (difference == 0)
    throw UsageError(flag + ": the start batch size equals --global-batch-size (" + str(global_batch_size) +
                     "); there is nothing to ramp up");
  if (difference % r.increment != 0)
    throw UsageError(flag + ": --global-batch-size minus the start batch size (" + str(difference) +
                     ") is not divisible by the increment (" + str(r.increment) + ")");
  // Python's true division: rampup_samples_per_increment is a float.
  samples_per_increment_ = static_cast<double>(r.samples) / static_cast<double>(difference / r.increment);
}

std::int64_t GlobalBatchSizeSchedule::global_batch_size(std::int64_t consumed_samples) const {
  if (!rampup_ || consumed_samples > rampup_->samples) return global_batch_size_;
  // int(consumed_samples / rampup_samples_per_increment): truncation of a float quotient.
  const auto steps = static_cast<std::int64_t>(static_cast<double>(consumed_samples) / samples_per_increment_);
  return rampup_->start + steps * rampup_->increment;
}

std::int64_t GlobalBatchSizeSchedule::train_iters(std::int64_t train_samples) const {
  if (!rampup_) return train_samples / global_batch_size_;
  std::int64_t iterations = 0;
  std::int64_t consumed = 0;
  while (consumed <= rampup_->samples && consumed <= train_samples) {
    consumed += global_batch_size(consumed);
    ++iterations;
  }
  // The partial last batch is dropped.
  if (train_samples > consumed) iterations += (train_samples - consumed) / global_batch_size_;
  return iterations;
}

std::vector<std::int64_t> GlobalBatchSizeSchedule::batch_sizes_used(std::int64_t train_iters) const {
  std::vector<std::int64_t> sizes;
  std::int64_t consumed = 0;
  for (std::int64_t i = 0; i < train_iters; ++i) {
    const std::int64_t size = global_batch_size(consumed);
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
    if (size == global_batch_size_) break;  // the ramp is over
    consumed += size;
  }
  return sizes;
}

}  // namespace mgt
