// Keeps the ranks of a run in step when a step can fail on some ranks only (one rank takes the
// save directory's lock, writes the checkpoint, builds the dataset cache; any rank may run out of
// memory). A rank that stopped with an error while the others went on would leave them waiting in
// their next collective until the watchdog ends the job; instead every rank learns, at the end of
// the step, whether it failed anywhere, and all stop together.
#pragma once
#include <functional>
#include <string>

#include "core/error.hpp"
#include "dist/communicator.hpp"

namespace mgt {

// What every rank throws when a step failed on any of them: a rank where it failed carries its own
// message and exit code. Every rank is then past the same collective with nothing in flight, so
// a program can leave MPI in order (train_launch.cpp) and every rank's message gets printed,
// rather than the first rank to exit making the launcher kill the others mid-sentence.
class FailedOnSomeRank : public Error {
public:
  FailedOnSomeRank(const std::string& message, int exit_code) : Error(message, exit_code) {}
};

// Runs `step` (on this rank; pass an empty function where this rank has nothing to do), then
// all-reduces whether it failed over `world`. When it failed anywhere every rank throws
// FailedOnSomeRank: with its own error where the step threw, else naming the lowest failing
// rank and `what` ("saving the checkpoint"). In a world of one the error is rethrown as it is.
void run_on_all_ranks_or_none(dist::Communicator& world, const char* what, const std::function<void()>& step);

}  // namespace mgt
