#include "model/parameter_init.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "core/error.hpp"
#include "kernels/philox.hpp"

namespace mgt {
namespace {

// A uniform in [0, 1) with 53 random bits from two 32-bit words.
double uniform53(uint32_t lo, uint32_t hi) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

}  // namespace

uint64_t parameter_stream(std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char ch : name) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::array<double, 2> standard_normal_pair(uint64_t seed, uint64_t stream, uint64_t pair) {
  const PhiloxCounter words =
      philox4x32_10({static_cast<uint32_t>(pair), static_cast<uint32_t>(pair >> 32),
                          static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                         {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  // Half a step off zero keeps log(u1) finite.
  const double u1 = uniform53(words[0], words[1]) + 0x1.0p-54;
  const double u2 = uniform53(words[2], words[3]);
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

double symmetric_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  // Its own counter space (the top bit set), apart from the normal pairs' of the same stream.
  const uint64_t counter = index | (uint64_t{1} << 63);
  const PhiloxCounter words =
      philox4x32_10({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                     static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return 2.0 * uniform53(words[0], words[1]) - 1.0;
}

double standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  return standard_normal_pair(seed, stream, index / 2)[index % 2];
}

void initialize_parameter(const ParameterEntry& entry, const TensorParallelRank& tp, uint64_t seed,
                          std::span<float> out) {
  if (static_cast<int64_t>(out.size()) != entry.numel()) {
    throw Error("initialize_parameter: " + entry.name + " has " + std::to_string(entry.numel()) +
                " local elements, got a buffer of " + std::to_string(out.size()));
  }
  initialize_parameter_range(entry, tp, seed, 0, out);
}

void initialize_parameter_range(const ParameterEntry& entry, const TensorParallelRank& tp, uint64_t seed,
                                int64_t first, std::span<float> out) {
  if (first < 0 || first + static_cast<int64_t>(out.size()) > entry.numel()) {
    throw Error("initialize_parameter: " + entry.name + " has " + std::to_string(entry.numel()) +
                " local elements, asked for " + std::to_string(out.size()) + " from " + std::to_string(first));
  }
  switch (entry.init) {
    case ParameterInit::kZeros:
      std::fill(out.begin(), out.end(), 0.0f);
      return;
    case ParameterInit::kOnes:
      std::fill(out.begin(), out.end(), 1.0f);
      return;
    case ParameterInit::kNormal:
      break;
    case ParameterInit::kUniform: {
      const uint64_t stream = parameter_stream(entry.name);
      for (std::size_t i = 0; i < out.size(); ++i) {
        const auto global = static_cast<uint64_t>(entry.global_index(first + static_cast<int64_t>(i), tp));
        out[i] = static_cast<float>(entry.init_std * symmetric_uniform(seed, stream, global));
      }
      return;
    }
  }
  const uint64_t stream = parameter_stream(entry.name);
  const auto n = static_cast<int64_t>(out.size());
  for (int64_t i = 0; i < n;) {
    const auto global = static_cast<uint64_t>(entry.global_index(first + i, tp));
    const std::array<double, 2> z = standard_normal_pair(seed, stream, global / 2);
    out[static_cast<size_t>(i)] = static_cast<float>(entry.init_std * z[global % 2]);
    ++i;
    // Shards keep pairs together almost always: use the sine half without a second draw.
    if (global % 2 == 0 && i < n &&
        static_cast<uint64_t>(entry.global_index(first + i, tp)) == global + 1) {
      out[static_cast<size_t>(i)] = static_cast<float>(entry.init_std * z[1]);
      ++i;
    }
  }
}

}  // namespace mgt
