// The random numbers of sampling: a 64-bit generator whose output is fixed by its definition
// (SplitMix64 seeding a xoshiro256** state), so a seed gives the same completions on every
// platform and standard library. Each prompt gets its own stream, derived from the run's seed
// and the prompt's index, so a completion does not depend on which prompts share its batch.
#pragma once
#include <array>
#include <cstdint>

namespace mgt {

class SampleRng {
public:
  SampleRng(uint64_t seed, uint64_t stream);

  uint64_t next();
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  std::array<uint64_t, 4> s_{};
};

}  // namespace mgt
