#include "core/megatron_flags.hpp"

#include <algorithm>
#include <array>

namespace mgt {

namespace {

constexpr MegatronFlag kFlags[] = {
#include "core/megatron_flags.inc"
};

}  // namespace

std::span<const MegatronFlag> megatron_flags() { return kFlags; }

std::optional<MegatronFlag> find_megatron_flag(std::string_view name) {
  auto it = std::lower_bound(std::begin(kFlags), std::end(kFlags), name,
                             [](const MegatronFlag& f, std::string_view n) { return f.name < n; });
  if (it == std::end(kFlags) || it->name != name) return std::nullopt;
  return *it;
}

}  // namespace mgt
