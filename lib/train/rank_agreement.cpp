#include "train/rank_agreement.hpp"

#include <cstdint>
#include <exception>
#include <span>

namespace mgt {

void run_on_all_ranks_or_none(dist::Communicator& world, const char* what, const std::function<void()>& step) {
  std::exception_ptr failure;
  try {
    if (step) step();
  } catch (...) {
    failure = std::current_exception();
  }
  if (world.size() == 1) {
    if (failure) std::rethrow_exception(failure);
    return;
  }
  // size − (lowest failing rank), or 0 when no rank failed: the maximum finds the lowest.
  std::int64_t mark = failure ? world.size() - world.rank() : 0;
  world.all_reduce(std::span<std::int64_t>(&mark, 1), dist::ReduceOp::Max);
  if (mark == 0) return;
  if (!failure)
    throw FailedOnSomeRank(std::string(what) + " failed on rank " + std::to_string(world.size() - mark) +
                               " (its message says why); every rank stops",
                           kExitFailure);
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    throw FailedOnSomeRank(e.what(), e.exit_code());
  } catch (const std::exception& e) {
    throw FailedOnSomeRank(e.what(), kExitFailure);
  } catch (...) {
    throw FailedOnSomeRank(std::string(what) + " failed", kExitFailure);
  }
}

}  // namespace mgt
