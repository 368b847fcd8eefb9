// What mgt-train asks of each rank's backend: Megatron's --profile on the ranks of
// --profile-ranks, with mgt's --profile-gemms and --profile-timeline.
#pragma once
#include "kernels/backend_factory.hpp"
#include "train/train_options.hpp"

namespace mgt {

// The options of world rank `rank`'s backend: the defaults unless it is profiled. With several
// profiled ranks each writes its own timeline, FILE.rankN.
BackendOptions rank_backend_options(const LoggingOptions& logging, std::int64_t rank);

}  // namespace mgt
