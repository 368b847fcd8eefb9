#include "train/weight_hash_check.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace mgt {

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The tensor's values as the layers compute with them, read to the host a chunk at a time.
std::uint64_t hash_tensor(const GptParameters& params, const ParameterEntry& e) {
  constexpr std::int64_t kChunk = std::int64_t{1} << 22;
  const ConstFloatView tensor = params.compute_param(e);
  std::vector<float> host(static_cast<std::size_t>(std::min(kChunk, tensor.size())));
  std::uint64_t h = mix(static_cast<std::uint64_t>(tensor.size()));
  for (std::int64_t first = 0; first < tensor.size(); first += kChunk) {
    const std::int64_t n = std::min(kChunk, tensor.size() - first);
    const std::span<float> part(host.data(), static_cast<std::size_t>(n));
    params.backend().copy_to_host(tensor.subspan(first, n), part);
    h = hash_values(part, h);
  }
  return h;
}

// Appends to `differing` the names of `entries` whose hashes differ on some rank of `group`.
void compare_over(const std::vector<const ParameterEntry*>& entries, const std::vector<std::int64_t>& hashes,
                  dist::Communicator* group, std::vector<std::string>& differing) {
  if (!group || group->size() == 1 || entries.empty()) return;
  std::vector<std::int64_t> all(hashes.size() * static_cast<std::size_t>(group->size()));
  group->all_gather(std::span<const std::int64_t>(hashes), std::span<std::int64_t>(all));
  for (std::size_t i = 0; i < entries.size(); ++i)
    for (int r = 0; r < group->size(); ++r)
      if (all[static_cast<std::size_t>(r) * hashes.size() + i] != hashes[i]) {
        differing.push_back(entries[i]->name);
        break;
      }
}

}  // namespace

std::uint64_t hash_values(std::span<const float> values, std::uint64_t seed) {
  std::uint64_t h = mix(seed ^ 0x9e3779b97f4a7c15ULL);
  std::size_t i = 0;
  for (; i + 2 <= values.size(); i += 2) {
    std::uint64_t word;
    std::memcpy(&word, &values[i], sizeof word);
    h = mix(h ^ word) + 0x9e3779b97f4a7c15ULL;
  }
  if (i < values.size()) h = mix(h ^ std::bit_cast<std::uint32_t>(values[i]));
  return h;
}

std::vector<std::string> tensors_differing_across_replicas(const GptParameters& params,
                                                           dist::Communicator* data_parallel,
                                                           dist::Communicator* expert_data_parallel) {
  // Megatron's two groups: the routed experts' tensors (allreduce = False) over the expert-data-
  // parallel ranks, the rest over the data-parallel ranks.
  std::vector<const ParameterEntry*> dense, experts;
  std::vector<std::int64_t> dense_hashes, expert_hashes;
  const bool expert_group = expert_data_parallel != nullptr;
  for (const ParameterEntry& e : params.entries()) {
    const bool expert = expert_group && e.expert_parallel;
    (expert ? experts : dense).push_back(&e);
    (expert ? expert_hashes : dense_hashes).push_back(static_cast<std::int64_t>(hash_tensor(params, e)));
  }
  std::vector<std::string> differing;
  compare_over(dense, dense_hashes, data_parallel, differing);
  if (expert_group) compare_over(experts, expert_hashes, expert_data_parallel, differing);
  return differing;
}

}  // namespace mgt
