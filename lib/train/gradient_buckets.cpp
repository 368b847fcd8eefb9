#include "train/gradient_buckets.hpp"

#include <algorithm>
#include <span>

#include "core/error.hpp"

namespace mgt {

std::int64_t default_ddp_bucket_size(std::int64_t data_parallel_size) {
  return std::max<std::int64_t>(40000000, 1000000 * data_parallel_size);
}

std::vector<GradientBucket> gradient_buckets(const GptParameters& params, std::optional<std::int64_t> bucket_size,
                                             const std::function<bool(const ParameterEntry&)>& finalized_later) {
  if (bucket_size && *bucket_size <= 0) throw Error("internal error: a bucket size must be positive");
  const std::span<const ParameterEntry> entries = params.entries();
  const std::int64_t buffer_size = params.params().size();
  std::vector<GradientBucket> buckets;
  GradientBucket open{buffer_size, buffer_size, false};
  const auto close = [&] {
    if (open.begin < open.end) buckets.push_back(open);
    open = {open.begin, open.begin, false};
  };
  for (auto e = entries.rbegin(); e != entries.rend(); ++e) {
    const bool later = finalized_later(*e);
    const bool own_bucket = later && e->name == "embedding.word_embeddings.weight";
    if (own_bucket) close();
    open.begin = e->offset;
    open.finalized_later = open.finalized_later || later;
    if (own_bucket || (bucket_size && open.size() >= *bucket_size)) close();
  }
  // The buffer's start (before the first parameter, if anything is there) joins the last bucket.
  open.begin = 0;
  if (open.begin < open.end) {
    buckets.push_back(open);
  } else if (!buckets.empty()) {
    buckets.back().begin = 0;
  }
  return buckets;
}

}  // namespace mgt
