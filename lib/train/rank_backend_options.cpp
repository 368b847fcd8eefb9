#include "train/rank_backend_options.hpp"

#include <algorithm>
#include <string>

namespace mgt {

BackendOptions rank_backend_options(const LoggingOptions& logging, std::int64_t rank) {
  BackendOptions options;
  const std::vector<std::int64_t>& ranks = logging.profile_ranks;
  if (!logging.profile || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) return options;
  options.profile = true;
  options.profile_gemms = logging.profile_gemms;
  if (logging.profile_timeline) {
    options.profile_timeline = *logging.profile_timeline;
    if (ranks.size() > 1) options.profile_timeline += ".rank" + std::to_string(rank);
  }
  return options;
}

}  // namespace mgt
