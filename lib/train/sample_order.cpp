#include "train/sample_order.hpp"

#include "core/error.hpp"
#include "data/torch_randperm.hpp"

namespace mgt {

SampleOrder::SampleOrder(SampleOrderSettings settings) : s_(std::move(settings)) {
  if (s_.micro_batch_size <= 0 || s_.data_parallel_size <= 0 || s_.data_parallel_rank < 0 ||
      s_.data_parallel_rank >= s_.data_parallel_size || s_.split_samples < 0)
    throw Error("internal error: bad sample order settings");
}

std::vector<std::int64_t> SampleOrder::micro_batch(std::int64_t consumed) {
  if (s_.split_samples == 0) throw Error("the " + s_.split_name + " split has no samples");
  return s_.cyclic ? cyclic(consumed) : single(consumed);
}

std::vector<std::int64_t> SampleOrder::single(std::int64_t consumed) const {
  std::vector<std::int64_t> indices;
  for (std::int64_t j = 0; j < s_.micro_batch_size; ++j) {
    std::int64_t index = consumed + s_.data_parallel_rank * s_.micro_batch_size + j;
    if (index >= s_.split_samples) {
      if (!s_.wrap)
        throw Error("the " + s_.split_name + " split ran out of samples: sample " + std::to_string(index) +
                    " was asked for and it has " + std::to_string(s_.split_samples));
      index %= s_.split_samples;
    }
    indices.push_back(index);
  }
  return indices;
}

std::vector<std::int64_t> SampleOrder::cyclic(std::int64_t consumed) {
  const std::int64_t chunk = s_.micro_batch_size * s_.data_parallel_size;
  const std::int64_t active = s_.split_samples - s_.split_samples % chunk;
  if (active == 0)
    throw Error("--dataloader-type cyclic: the " + s_.split_name + " split has " + std::to_string(s_.split_samples) +
                " samples, fewer than one micro-batch for each data-parallel rank (" + std::to_string(chunk) + ")");
  if (consumed % chunk != 0)
    throw Error("--dataloader-type cyclic: " + std::to_string(consumed) + " consumed " + s_.split_name +
                " samples are not a whole number of micro-batches of every data-parallel rank (" +
                std::to_string(chunk) + ")");
  const std::int64_t epoch = consumed / active;
  const std::int64_t within = consumed % active;  // Megatron's current_epoch_samples
  std::vector<std::int64_t> indices;
  if (s_.data_sharding) {
    const std::int64_t share = active / s_.data_parallel_size;  // Megatron's bucket_size
    if (epoch != epoch_) permutation_ = torch_randperm(share, static_cast<std::uint64_t>(epoch));
    const std::int64_t offset = within / s_.data_parallel_size;
    for (std::int64_t j = 0; j < s_.micro_batch_size; ++j)
      indices.push_back(s_.data_parallel_rank * share + permutation_[static_cast<std::size_t>(offset + j)]);
  } else {
    // Megatron's full_bucket_size: the split's whole micro-batches.
    const std::int64_t whole = s_.split_samples / s_.micro_batch_size * s_.micro_batch_size;
    if (epoch != epoch_) permutation_ = torch_randperm(whole, static_cast<std::uint64_t>(epoch));
    for (std::int64_t j = 0; j < s_.micro_batch_size; ++j)
      indices.push_back(
          permutation_[static_cast<std::size_t>(within + s_.data_parallel_rank + j * s_.data_parallel_size)]);
  }
  epoch_ = epoch;
  return indices;
}

}  // namespace mgt
