// How lib/dist's checked-call macros name a failing call and where it was made.
#pragma once
#include <string>

namespace mgt::dist {

// "MPI_Allreduce" from the call's text "MPI_Allreduce(MPI_IN_PLACE, ...)".
std::string call_name(const char* call_text);

// "lib/dist/mpi_communicator.cpp:42" from __FILE__ and __LINE__ (the path from lib/ on).
std::string source_location(const char* file, int line);

}  // namespace mgt::dist
