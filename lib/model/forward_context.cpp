#include "model/forward_context.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {
namespace {

constexpr int kSiteBits = 24;
constexpr uint64_t kSitesPerLayer = 4;

}  // namespace

DropoutKey dropout_key(const DropoutRng& rng, int64_t layer, DropoutSite site) {
  const uint64_t slot =
      static_cast<uint64_t>(layer + 1) * kSitesPerLayer + static_cast<uint64_t>(site);
  if (layer < -1 || slot >= (uint64_t{1} << kSiteBits)) {
    throw Error("dropout_key: layer " + std::to_string(layer) + " is out of range");
  }
  if (rng.micro_step >= (uint64_t{1} << (64 - kSiteBits))) {
    throw Error("dropout_key: micro-step " + std::to_string(rng.micro_step) + " is too large");
  }
  DropoutKey key;
  key.seed = rng.seed;
  key.stream = (rng.micro_step << kSiteBits) | slot;
  key.offset = 0;
  return key;
}

}  // namespace mgt
