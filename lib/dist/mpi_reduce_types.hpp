// Internal to lib/dist (includes mpi.h): the MPI datatype and reduction of each element type and
// reduce operation, shared by the blocking and the started collectives.
#pragma once
#include <mpi.h>

#include "dist/comm_buffer.hpp"

namespace mgt::dist {

MPI_Datatype mpi_type(ElementType type);
// bf16 and fp16 (which MPI lacks) get operations of their own, summing in fp32 as NCCL does.
MPI_Op mpi_op(ReduceOp op, ElementType type);

}  // namespace mgt::dist
