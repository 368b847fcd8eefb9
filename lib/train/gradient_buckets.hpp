// Megatron's gradient buckets (megatron/core/distributed/param_and_grad_buffer.py
// _ParamAndGradBuffer): the parameters taken in reverse order — the order in which a backward
// finishes their gradients — and cut into buckets of at least --ddp-bucket-size elements at
// parameter boundaries, so that each bucket's reduction can start while the backward computes
// the gradients of the buckets after it.
//
// mgt's buckets are ranges of the model's own flat buffer, which they cover without gaps (the
// alignment gaps go with the parameter before them). Megatron pads each bucket to a multiple of
// the data-parallel size and shards every bucket; mgt keeps one distributed-optimizer shard per
// rank of the whole buffer (dist/buffer_shards.hpp), so its checkpoints do not depend on the
// bucket size, and reduces each bucket's part of every rank's shard.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/gpt_parameters.hpp"

namespace mgt {

struct GradientBucket {
  std::int64_t begin = 0;  // flat-buffer range
  std::int64_t end = 0;
  // Holds a parameter whose gradient is changed after the backward (sequence-parallel norms,
  // a word embedding tied across pipeline stages): its reduction starts only after that.
  bool finalized_later = false;
  std::int64_t size() const { return end - begin; }
};

// Megatron's DistributedDataParallel default for --ddp-bucket-size:
// max(40000000, 1000000 × data-parallel size) elements.
std::int64_t default_ddp_bucket_size(std::int64_t data_parallel_size);

// The buckets of `params`, the end of the buffer first. `bucket_size` unset: one bucket (Megatron
// without --overlap-grad-reduce, and on pipeline stages after the first). A parameter for which
// `finalized_later` holds is a bucket of its own when it is a word embedding tied across
// pipeline stages (Megatron gives the shared embedding its own bucket), and otherwise marks the
// bucket holding it.
std::vector<GradientBucket> gradient_buckets(const GptParameters& params, std::optional<std::int64_t> bucket_size,
                                             const std::function<bool(const ParameterEntry&)>& finalized_later);

}  // namespace mgt
